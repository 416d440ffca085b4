// A scheduling directive as plain data: the primitive a user called on a Func or Stage and its
// arguments. The front end only records directives (after checks that need no loop structure);
// schedule/ interprets them, validates them against the loop nest and lowers them. Because a
// schedule is nothing but this list, it saves to JSON, prints as C++ and replays on a freshly
// built pipeline of the same algorithm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// How a split handles an extent that is not a multiple of the factor.
enum class TailStrategy : uint8_t {
    Auto,         ///< ShiftInwards for pure definitions writing only their own site, else Guard
    GuardWithIf,  ///< the last iteration skips points past the end
    ShiftInwards, ///< the last iteration shifts inwards and recomputes some points
    RoundUp,      ///< compute past the end (the realization is rounded up)
};
const char *tail_strategy_name(TailStrategy t);
bool parse_tail_strategy(const std::string &s, TailStrategy *out);

/// One recorded scheduling call.
struct Directive {
    std::string func;      ///< the Func the directive was called on
    int stage = 0;         ///< 0 for the pure definition, i + 1 for update(i)
    std::string primitive; ///< split, fuse, reorder, vectorize, unroll, parallel, serial,
                           ///< compute_at, store_at, compute_root, store_root, compute_inline,
                           ///< reorder_storage, bound, store_in, rfactor
    std::vector<std::string> vars; ///< variable names, in the order the primitive takes them
    std::vector<bool> is_rvar;     ///< per var: whether it names an RVar
    std::vector<int64_t> ints;     ///< factors, bounds
    std::string target;            ///< compute_at/store_at: the consumer Func; rfactor: new Func
    std::string option;            ///< tail strategy, memory type
    int64_t sequence = 0;          ///< global order of the calls, so a trace can be replayed
};

/// A process-wide increasing number for ordering directives across Funcs.
int64_t next_directive_sequence();

} // namespace kiln
