// Internal to apps/: the builtin operators (one source file each) and helpers they share.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "apps/Operator.h"

namespace kiln::apps {

Operator matmul_operator();
Operator matmul_u8s8_operator();
Operator matmul_bf16_operator();
Operator conv2d_operator();
Operator conv2d_packed_operator();
Operator conv2d_nhwc_operator();
Operator conv2d_pack_operator();
Operator blur_operator();
Operator blur_u16_operator();
Operator softmax_operator();
Operator layernorm_operator();
Operator harris_operator();
std::vector<Operator> test_only_operators();

/// Makes `op` a generator-defined operator (Operator::generator) from its algorithm and its
/// schedule: the generator builds `op.make`'s algorithm (without input data) at
/// ctx.shape(op.shape_names, op.default_shape), gives the output's estimates and the inputs'
/// order, then calls `schedule`, which declares the knobs and writes the schedule for
/// ctx.target(). op.hand_schedule becomes schedule_from_generator. op.make, the shape names
/// and the default shape must be set.
using BuiltinSchedule = std::function<void(OperatorInstance &, GeneratorContext &)>;
void define_by_generator(Operator &op, const BuiltinSchedule &schedule);

/// The values of a knob whose default is the hand schedule's: `hand` first, then the others of
/// `values` in order.
std::vector<int64_t> hand_first(int64_t hand, const std::vector<int64_t> &values);
/// lo, 2 lo, ... up to hi.
std::vector<int64_t> powers_of_two(int64_t lo, int64_t hi);
/// A hand schedule's number of tasks that each work on data of their own: the power of two
/// from 2 to 32 that is at least the target's thread count (Target::threads), or where that is
/// not set the runtime's when the schedule is built (kiln_get_num_threads()).
int64_t hand_task_count(const Target &target);
/// Hand schedules store outputs of at least this many bytes non-temporally
/// (Func::store_nontemporal): larger than the caches of the machines kiln is tuned on, they
/// would only evict the inputs.
constexpr int64_t streaming_bytes = int64_t(16) << 20;
/// out.store_nontemporal() when the output has at least streaming_bytes. Not a knob: a knob would
/// turn an operator that has none (softmax, layernorm) from the automatic space into a template.
void stream_large_output(Func out, int64_t bytes);
/// A hand schedule's tile for a small shape: `tile` halved while it exceeds `extent`, down to
/// no less than `smallest`.
int64_t halved_to_fit(int64_t tile, int64_t extent, int64_t smallest = 1);

/// A row reduction written for vector hardware: total(y) reduces value(x, y) over x in [0, n).
/// partial(l, y) reduces the elements x = l + lanes * b for the full blocks b < n / lanes (so a
/// schedule can vectorize l and keep several accumulators), total combines the lanes, then the
/// n % lanes tail. Sums are reassociated by this; maxima are not changed.
struct RowReduction {
    Func partial, total;
};
RowReduction row_reduction(const std::string &name, const std::function<Expr(Expr, Expr)> &value,
                           int n, int lanes, bool is_max);

/// The GPU schedule of a row-wise operator built from row_reductions (softmax, layernorm): a
/// block per row (the output's y) with `threads` threads across it. Each reduction's partial
/// (stages[p] for p in partials) is the cross-thread step: thread l of the block reduces the
/// elements l, l + lanes, ... of the row into a shared array of `lanes` values; its total and the
/// other per-row values (stages[t] for t in totals) then combine them at block level, in thread
/// 0, into shared memory, and every thread writes its columns of the output. stages[row_stage]
/// (-1: none), a per-element Func the output and a reduction both read (softmax's exponentials),
/// is kept in shared memory when the row fits in 32 KiB, else inlined.
void schedule_row_reductions_gpu(OperatorInstance &inst, const std::vector<int> &partials,
                                 const std::vector<int> &totals, int row_stage, int threads = 128);
/// The knob of that schedule's threads per row (128 by default), within the device's limit.
int row_threads_knob(GeneratorContext &ctx);

/// The CPU tasks of a row-wise operator: splits the output's rows y (extent `rows`) into tasks
/// of 16 rows (fewer when there are fewer rows), runs the tasks in parallel and returns the row
/// loop inside a task, the level to compute each row's reductions at. On 2 cores, tasks of 16
/// rows ran layernorm 4096^2 in 5.8-6.7 ms where a task per row took 6.7-8.7 ms (interleaved).
Var row_tasks(Func out, int64_t rows);

/// A buffer of the given type and extents filled with deterministic pseudo-random values from a
/// seed: floats uniform in [lo, hi), integers uniform in [lo, hi] (rounded).
BufferBase random_buffer(Type t, const std::vector<int> &extents, const std::string &name,
                         uint64_t seed, double lo, double hi);

/// The shape value as an int extent; raises CompileError naming the operator and the shape name
/// when it does not fit in [min_value, 2^31).
int shape_extent(const std::string &op, const std::string &shape_name, int64_t v,
                 int64_t min_value = 1);

} // namespace kiln::apps
