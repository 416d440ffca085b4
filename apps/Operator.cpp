#include "apps/Operator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "apps/Builtin.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"
#include "schedule/ScheduleTrace.h"

namespace kiln::apps {

namespace {

std::mutex registry_mutex;

std::map<std::string, Operator> &registry() {
    static std::map<std::string, Operator> operators;
    return operators;
}

void register_locked(Operator op) {
    if (op.name.empty()) user_error("register_operator: the operator has no name");
    if (!op.make || !op.hand_schedule || !op.work) {
        user_error("register_operator: operator '", op.name,
                   "' must set make, hand_schedule and work");
    }
    if (op.shape_names.size() != op.default_shape.size()) {
        user_error("register_operator: operator '", op.name, "' has ", op.shape_names.size(),
                   " shape names but a default shape of ", op.default_shape.size(), " values");
    }
    if (registry().count(op.name)) {
        user_error("register_operator: an operator named '", op.name,
                   "' is already registered; pick another name");
    }
    std::string name = op.name;
    registry().emplace(name, std::move(op));
}

bool builtins_registered = false;

void register_builtins_locked() {
    if (builtins_registered) return;
    builtins_registered = true;
    for (Operator op :
         {matmul_operator(), matmul_u8s8_operator(), matmul_bf16_operator(), conv2d_operator(),
          conv2d_packed_operator(), conv2d_nhwc_operator(), conv2d_pack_operator(), blur_operator(),
          blur_u16_operator(), softmax_operator(), layernorm_operator(), harris_operator()}) {
        register_locked(std::move(op));
    }
    for (Operator &op : test_only_operators()) {
        register_locked(std::move(op));
    }
}

/// Element i (in for_each_offset order) of a buffer as a double.
double element_as_double(const BufferBase &b, int64_t offset) {
    const uint8_t *p = b.raw_data();
    Type t = b.type();
    switch (t.code) {
    case Type::BFloat:
        return float_of_bfloat16_bits(reinterpret_cast<const uint16_t *>(p)[offset]);
    case Type::Float:
        return t.bits == 32 ? double(reinterpret_cast<const float *>(p)[offset])
                            : reinterpret_cast<const double *>(p)[offset];
    case Type::Int:
        switch (t.bits) {
        case 8:
            return reinterpret_cast<const int8_t *>(p)[offset];
        case 16:
            return reinterpret_cast<const int16_t *>(p)[offset];
        case 32:
            return reinterpret_cast<const int32_t *>(p)[offset];
        default:
            return double(reinterpret_cast<const int64_t *>(p)[offset]);
        }
    case Type::UInt:
    case Type::Bool:
        switch (t.bits) {
        case 1:
        case 8:
            return reinterpret_cast<const uint8_t *>(p)[offset];
        case 16:
            return reinterpret_cast<const uint16_t *>(p)[offset];
        case 32:
            return reinterpret_cast<const uint32_t *>(p)[offset];
        default:
            return double(reinterpret_cast<const uint64_t *>(p)[offset]);
        }
    }
    return 0;
}

} // namespace

void OperatorInstance::bind_inputs() const {
    internal_assert(inputs.size() == input_data.size(), "operator instance has ", inputs.size(),
                    " inputs but ", input_data.size(), " input buffers");
    for (size_t i = 0; i < inputs.size(); i++) {
        ImageParam p = inputs[i];
        p.set(input_data[i]);
    }
}

BufferBase OperatorInstance::make_output() const {
    return BufferBase(output.output_type(), output_extents, output.name());
}

BufferBase OperatorInstance::realize(const Target &target) const {
    bind_inputs();
    BufferBase out = make_output();
    pipeline().realize({out}, target);
    return out;
}

void register_operator(Operator op) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    register_builtins_locked();
    register_locked(std::move(op));
}

void register_builtin_operators() {
    std::lock_guard<std::mutex> lock(registry_mutex);
    register_builtins_locked();
}

namespace {
std::function<bool(const std::string &)> &resolver() {
    static std::function<bool(const std::string &)> r;
    return r;
}
} // namespace

void set_operator_resolver(std::function<bool(const std::string &name)> r) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    resolver() = std::move(r);
}

const Operator &find_operator(const std::string &name) {
    std::function<bool(const std::string &)> resolve;
    {
        std::lock_guard<std::mutex> lock(registry_mutex);
        register_builtins_locked();
        auto it = registry().find(name);
        if (it != registry().end()) return it->second;
        resolve = resolver();
    }
    // The resolver registers through register_operator, which takes the lock.
    bool resolved = resolve && resolve(name);
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry().find(name);
    if (it != registry().end()) return it->second;
    if (resolved) internal_error("the operator resolver did not register '", name, "'");
    std::string known;
    for (const auto &[n, op] : registry()) {
        if (op.test_only) continue;
        known += (known.empty() ? "" : ", ") + n;
    }
    user_error("unknown operator '", name, "'; known operators: ", known);
}

std::vector<const Operator *> all_operators(bool include_test_only) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    register_builtins_locked();
    std::vector<const Operator *> result;
    for (const auto &[n, op] : registry()) { // std::map: sorted by name
        if (include_test_only || !op.test_only) result.push_back(&op);
    }
    return result;
}

std::vector<int64_t> parse_shape(const Operator &op, const std::string &text) {
    if (text.empty()) return op.default_shape;
    std::string names;
    for (const std::string &n : op.shape_names) {
        names += (names.empty() ? "" : "x") + n;
    }
    std::vector<int64_t> shape;
    size_t start = 0;
    while (true) {
        size_t end = text.find_first_of("x,", start);
        std::string piece = text.substr(start, end == std::string::npos ? end : end - start);
        size_t used = 0;
        int64_t v = 0;
        bool ok = !piece.empty() && std::all_of(piece.begin(), piece.end(),
                                                [](char c) { return c >= '0' && c <= '9'; });
        if (ok) {
            try {
                v = std::stoll(piece, &used);
            } catch (const std::exception &) {
                ok = false;
            }
        }
        if (!ok || used != piece.size() || v <= 0 || v > std::numeric_limits<int32_t>::max()) {
            user_error("shape '", text, "' for operator '", op.name, "': '", piece,
                       "' is not a positive integer below 2^31; write ", names, " (e.g. ",
                       shape_to_string(op.default_shape), ")");
        }
        shape.push_back(v);
        if (end == std::string::npos) break;
        start = end + 1;
    }
    if (shape.size() != op.shape_names.size()) {
        user_error("shape '", text, "' for operator '", op.name, "' has ", shape.size(),
                   " values, but the operator takes ", op.shape_names.size(), ": ", names,
                   " (e.g. ", shape_to_string(op.default_shape), ")");
    }
    return shape;
}

std::string shape_to_string(const std::vector<int64_t> &shape) {
    std::string s;
    for (size_t i = 0; i < shape.size(); i++) {
        s += (i ? "x" : "") + std::to_string(shape[i]);
    }
    return s;
}

double max_relative_error(const BufferBase &got, const BufferBase &expected) {
    const double inf = std::numeric_limits<double>::infinity();
    if (!got.defined() || !expected.defined()) return inf;
    if (got.type() != expected.type() || got.dimensions() != expected.dimensions()) return inf;
    for (int d = 0; d < got.dimensions(); d++) {
        if (got.dim(d).extent != expected.dim(d).extent) return inf;
    }
    std::vector<int64_t> got_offsets, expected_offsets;
    got_offsets.reserve(size_t(got.number_of_elements()));
    expected_offsets.reserve(size_t(expected.number_of_elements()));
    got.for_each_offset([&](int64_t o) { got_offsets.push_back(o); });
    expected.for_each_offset([&](int64_t o) { expected_offsets.push_back(o); });
    double worst = 0;
    for (size_t i = 0; i < got_offsets.size(); i++) {
        double a = element_as_double(got, got_offsets[i]);
        double b = element_as_double(expected, expected_offsets[i]);
        if (std::isnan(a) != std::isnan(b)) return inf;
        if (std::isnan(a)) continue;
        if (a == b) continue; // equal infinities
        double e = std::abs(a - b) / std::max(1.0, std::abs(b));
        if (std::isnan(e)) return inf;
        worst = std::max(worst, e);
    }
    return worst;
}

namespace {
/// Set while buffer_bytes builds an instance: random_buffer then adds its buffer's bytes here
/// instead of allocating it.
thread_local int64_t *counted_bytes = nullptr;

int64_t bytes_of(Type t, const std::vector<int> &extents) {
    int64_t n = t.bytes();
    for (int e : extents)
        n *= e;
    return n;
}
} // namespace

namespace {

/// op.make(shape) with random_buffer counting the bytes it would fill into `counted` instead of
/// making buffers.
OperatorInstance
make_counting(const std::function<OperatorInstance(const std::vector<int64_t> &)> &make,
              const std::vector<int64_t> &shape, int64_t &counted) {
    counted_bytes = &counted;
    OperatorInstance inst;
    try {
        inst = make(shape);
    } catch (...) {
        counted_bytes = nullptr;
        throw;
    }
    counted_bytes = nullptr;
    return inst;
}

} // namespace

OperatorInstance make_without_data(const Operator &op, const std::vector<int64_t> &shape) {
    int64_t counted = 0;
    return make_counting(op.make, shape, counted);
}

int64_t buffer_bytes(const Operator &op, const std::vector<int64_t> &shape) {
    int64_t counted = 0;
    OperatorInstance inst = make_counting(op.make, shape, counted);
    for (const BufferBase &b : inst.input_data) {
        if (b.defined()) counted += b.number_of_elements() * b.type().bytes(); // made otherwise
    }
    return counted + bytes_of(inst.output.output_type(), inst.output_extents);
}

void schedule_from_generator(const GeneratorFunction &generator,
                             const std::map<std::string, std::string> &params,
                             OperatorInstance &inst, const Target &target,
                             const std::map<std::string, std::string> &knob_values) {
    GeneratorContext ctx(target, params);
    ctx.set_tuning_shape(inst.shape);
    ctx.set_knob_values(knob_values);
    Pipeline scheduled = generator(ctx);
    ScheduleTrace::capture(scheduled.output_funcs()).apply({inst.output});
}

std::map<std::string, std::string> parse_knob_values(const std::string &text) {
    std::map<std::string, std::string> values;
    std::stringstream items(text);
    std::string item;
    while (std::getline(items, item, ',')) {
        const size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
            user_error("knob values: '", item, "' is not knob=value (e.g. tile_x=16,unroll=1)");
        values[item.substr(0, eq)] = item.substr(eq + 1);
    }
    return values;
}

void check_knob_names(const Operator &op, const std::vector<int64_t> &shape, const Target &target,
                      const std::map<std::string, std::string> &knob_values) {
    if (knob_values.empty()) return;
    if (!op.generator) user_error("operator '", op.name, "' has no template: it takes no knobs");
    GeneratorContext ctx(target, op.generator_params);
    ctx.set_tuning_shape(shape);
    op.generator(ctx);
    std::string known;
    for (const GeneratorKnob &k : ctx.knobs())
        known += (known.empty() ? "" : ", ") + k.name;
    for (const auto &knob_value : knob_values) {
        const std::string &name = knob_value.first;
        const bool declared = std::any_of(ctx.knobs().begin(), ctx.knobs().end(),
                                          [&](const GeneratorKnob &k) { return k.name == name; });
        if (!declared) {
            user_error("operator '", op.name, "' has no knob '", name, "' for a ",
                       target.has_gpu() ? gpu_api_name(target.gpu) : "CPU",
                       " target; its knobs: ", known.empty() ? "none" : known);
        }
    }
}

void define_by_generator(Operator &op, const BuiltinSchedule &schedule) {
    internal_assert(op.make && !op.shape_names.empty(), "define_by_generator: ", op.name,
                    " needs make and its shape names");
    op.generator = [make = op.make, names = op.shape_names, defaults = op.default_shape,
                    tolerance = op.tolerance, schedule](GeneratorContext &ctx) -> Pipeline {
        std::vector<int64_t> shape = ctx.shape(names, defaults);
        int64_t counted = 0; // the algorithm only: no input data is made
        OperatorInstance inst = make_counting(make, shape, counted);
        std::vector<std::pair<int64_t, int64_t>> region;
        for (int e : inst.output_extents)
            region.emplace_back(0, e);
        inst.output.set_estimates(region);
        schedule(inst, ctx);
        std::vector<std::string> order;
        for (const ImageParam &in : inst.inputs)
            order.push_back(in.name());
        ctx.set_argument_order(order);
        ctx.set_tolerance(tolerance);
        return inst.pipeline();
    };
    op.hand_schedule = [generator = op.generator](OperatorInstance &inst, const Target &target) {
        schedule_from_generator(generator, {}, inst, target, {});
    };
}

std::vector<int64_t> hand_first(int64_t hand, const std::vector<int64_t> &values) {
    std::vector<int64_t> r{hand};
    for (int64_t v : values)
        if (v != hand) r.push_back(v);
    return r;
}

void stream_large_output(Func out, int64_t bytes) {
    if (bytes >= streaming_bytes) out.store_nontemporal();
}

int64_t halved_to_fit(int64_t tile, int64_t extent, int64_t smallest) {
    while (tile > smallest && tile > extent)
        tile /= 2;
    return tile;
}

std::vector<int64_t> powers_of_two(int64_t lo, int64_t hi) {
    std::vector<int64_t> r;
    for (int64_t v = lo; v <= hi; v *= 2)
        r.push_back(v);
    return r;
}

int64_t hand_task_count(const Target &target) {
    const int threads = target.threads > 0 ? target.threads : kiln_get_num_threads();
    int64_t tasks = 2;
    while (tasks < std::min(32, threads))
        tasks *= 2;
    return tasks;
}

BufferBase random_buffer(Type t, const std::vector<int> &extents, const std::string &name,
                         uint64_t seed, double lo, double hi) {
    if (counted_bytes) {
        *counted_bytes += bytes_of(t, extents);
        return BufferBase();
    }
    BufferBase b(t, extents, name);
    // splitmix64: the same values on every platform and standard library.
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    auto next = [&]() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    uint8_t *p = b.raw_data();
    int64_t n = b.number_of_elements();
    for (int64_t i = 0; i < n; i++) {
        double u = double(next() >> 11) * 0x1.0p-53; // [0, 1)
        double v = lo + u * (hi - lo);
        if (t == Float(32)) {
            reinterpret_cast<float *>(p)[i] = float(v);
        } else if (t == Float(64)) {
            reinterpret_cast<double *>(p)[i] = v;
        } else if (t == BFloat(16)) {
            reinterpret_cast<uint16_t *>(p)[i] = bfloat16_bits_of(float(v));
        } else if (t == UInt(16)) {
            reinterpret_cast<uint16_t *>(p)[i] = uint16_t(std::floor(lo + u * (hi - lo + 1)));
        } else if (t == UInt(8)) {
            reinterpret_cast<uint8_t *>(p)[i] = uint8_t(std::floor(lo + u * (hi - lo + 1)));
        } else if (t == Int(8)) {
            reinterpret_cast<int8_t *>(p)[i] = int8_t(std::floor(lo + u * (hi - lo + 1)));
        } else if (t == Int(32)) {
            reinterpret_cast<int32_t *>(p)[i] = int32_t(std::floor(lo + u * (hi - lo + 1)));
        } else {
            internal_error("random_buffer: type ", t, " is not supported");
        }
    }
    return b;
}

int shape_extent(const std::string &op, const std::string &shape_name, int64_t v,
                 int64_t min_value) {
    if (v < min_value || v > std::numeric_limits<int32_t>::max()) {
        user_error("operator '", op, "': ", shape_name, " = ", v, " is out of range; it must be ",
                   "at least ", min_value, " and below 2^31");
    }
    return int(v);
}

} // namespace kiln::apps
