// SearchSpace: the knobs a tuner may turn for one operator, the constraints between them, and
// the schedule function that turns a config (one value per knob) into scheduling calls. Each
// knob is a finite list of values (split factors as divisors, powers of two or ranges;
// categorical names; booleans; loop permutations), so every strategy works on indices and the
// space can be enumerated, sampled and mutated the same way whatever the knob means.
//
//   SearchSpace s("matmul");
//   s.add_powers_of_two("tile_x", 8, 128);
//   s.add_choice("order", {"xyk", "xky"});
//   s.add_constraint("tile_x * tile_y <= 2048", [](const ConfigView &c) {
//       return c.i("tile_x") * c.i("tile_y") <= 2048; });
//   s.set_apply([](apps::OperatorInstance &inst, const ConfigView &c) { ... });
//
// A config's JSON form is an object of knob name -> value ({"tile_x": 32, "order": "xyk"}); its
// hash is a stable hex digest of the space name and that JSON, the key under which the tuning
// database stores it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/Operator.h"
#include "codegen/Target.h"
#include "schedule/ScheduleTrace.h"

namespace kiln::autotune {

/// The largest power of two not above v (1 when v < 2): the top of a tile-size knob that must
/// fit an extent.
int64_t floor_pow2(int64_t v);

/// One knob: a name and its finite list of values.
struct Knob {
    enum class Kind { integer, choice, boolean, permutation };
    std::string name;
    Kind kind = Kind::integer;
    std::vector<nlohmann::json> values;
    /// How likely each value is drawn at random (SearchSpace::random, repair), relative to the
    /// others; empty: all alike. A prior, not a constraint: every value stays reachable.
    std::vector<double> weights;
};

/// A point of a space: the index of the chosen value of each knob, in knob order.
struct Config {
    std::vector<int> index;
    bool operator==(const Config &) const = default;
};

class SearchSpace;

/// Typed read access to a config's knob values, for constraints and schedule functions.
class ConfigView {
public:
    ConfigView(const SearchSpace &space, const Config &config) : space(space), config(config) {}
    int64_t i(const std::string &knob) const;
    const std::string &s(const std::string &knob) const;
    bool b(const std::string &knob) const;
    std::vector<std::string> perm(const std::string &knob) const;
    bool has(const std::string &knob) const;

private:
    friend class SearchSpace; // reads the indices (implications)
    const nlohmann::json &value(const std::string &knob) const;
    const SearchSpace &space;
    const Config &config;
};

class SearchSpace {
public:
    using Check = std::function<bool(const ConfigView &)>;
    using Apply = std::function<void(apps::OperatorInstance &, const ConfigView &)>;

    explicit SearchSpace(std::string name) : space_name(std::move(name)) {}

    const std::string &name() const { return space_name; }
    const std::vector<Knob> &knobs() const { return knob_list; }
    /// The knob's position; raises CompileError naming the space and its knobs when unknown.
    int knob_index(const std::string &name) const;
    /// Whether the space has a knob of this name.
    bool has_knob(const std::string &name) const;

    // Building the space. Each raises CompileError for an empty value list or a second knob of
    // the same name.
    /// The divisors of n in [lo, hi].
    void add_divisors(const std::string &name, int64_t n, int64_t lo = 1, int64_t hi = INT64_MAX);
    /// lo, 2 lo, 4 lo, ... up to hi.
    void add_powers_of_two(const std::string &name, int64_t lo, int64_t hi);
    /// lo, lo + step, ... up to hi.
    void add_range(const std::string &name, int64_t lo, int64_t hi, int64_t step = 1);
    void add_integers(const std::string &name, const std::vector<int64_t> &values);
    void add_choice(const std::string &name, const std::vector<std::string> &values);
    void add_bool(const std::string &name);
    /// Every order of the items (items.size() <= 6).
    void add_permutation(const std::string &name, const std::vector<std::string> &items);
    /// A constraint every measured config must meet; `description` names it in rejections.
    void add_constraint(const std::string &description, Check check);
    /// A constraint that says why a config breaks it: "" when the config meets it, else the
    /// reason, which violated() returns (a generator's own ctx.constraint message).
    using Reason = std::function<std::string(const ConfigView &)>;
    void add_constraint_with_reason(Reason reason);
    /// An implication: where knob `when` has value `is`, knob `then` has value `value`. A
    /// constraint (valid() checks it, violated() names it: "`when` needs `then` `value`" for
    /// `is` true, "`then` is `value` without `when`" for false, "`when` `is` needs ..."
    /// otherwise) that draws keep by construction: random() and repair() set `then` wherever
    /// `when` has `is`. A knob that picks a structure (the generated space's tensorize) so holds
    /// the knobs it leaves without meaning at one value, so that no two configs are one schedule,
    /// without a repair walk having to move each of them (a walk would rather turn the structure
    /// off, which clears all of them in one move). Raises CompileError for an unknown knob or a
    /// value not in the knob's list.
    void add_implication(const std::string &when, const nlohmann::json &is, const std::string &then,
                         const nlohmann::json &value);
    /// Couples two integer knobs for mutation: a step of either to its next or previous value is,
    /// half of the time, matched by a step of the other in the same direction. A register tile's
    /// vector width and its width are coupled, so that a wider vector over a wider tile (the
    /// same number of accumulators) is one move away, not two moves that each break the tile.
    /// Raises CompileError for an unknown knob, a knob that is not an integer, or a knob coupled
    /// to itself.
    void add_coupling(const std::string &a, const std::string &b);
    /// The coupled knobs of `knob` (knob indices).
    std::vector<int> coupled(int knob) const;
    /// A prior over the knob's values for random draws (Knob::weights), one positive weight per
    /// value in the knob's order: the generated space makes the values that the machine favours
    /// (the natural vector width, parallel loops) likelier among a new run's first samples.
    /// Raises CompileError for an unknown knob, a count that is not the knob's value count, or
    /// a weight that is not a positive finite number.
    void set_weights(const std::string &knob, const std::vector<double> &weights);
    void set_apply(Apply apply) { apply_fn = std::move(apply); }

    /// Number of configs, constraints ignored (saturates at INT64_MAX).
    int64_t size() const;
    /// A random point, each knob drawn by its weights (uniformly without), then the implications
    /// applied; other constraints ignored.
    Config random(std::mt19937_64 &rng) const;
    /// The i-th config in mixed-radix order (the last knob varies fastest), i < size().
    Config at(int64_t i) const;
    /// The description of the first constraint the config breaks, or "" when it meets them all.
    std::string violated(const Config &c) const;
    bool valid(const Config &c) const { return violated(c).empty(); }
    /// How many constraints the config breaks.
    int violations(const Config &c) const;
    /// A valid config near c (c itself when it is valid): one knob at a time is redrawn (by its
    /// weights, never to its current value), and the change kept when the config then breaks no
    /// more constraints than before (a WalkSAT-like walk), for at most `steps` draws; nullopt when
    /// the walk finds none. Strategies repair their random draws and mutations with it, so a space
    /// whose constraints reject most uniform draws (tiles that must divide the shape, a vector that
    /// must divide the tile) still yields valid configs near the ones drawn.
    std::optional<Config> repair(const Config &c, std::mt19937_64 &rng, int steps = 64) const;

    nlohmann::json to_json(const Config &c) const;
    /// Reads a config; raises CompileError naming the space, the knob and the legal values for a
    /// missing or unknown knob or a value outside the knob's list, and naming the constraint for
    /// a config that breaks one.
    Config from_json(const nlohmann::json &j) const;
    /// A stable hex digest of the space name and the config's JSON ("a1b2...", 16 digits).
    std::string hash(const Config &c) const;
    /// Mixed into every hash: the tuner sets the workload (algorithm hash and shape), since the
    /// same knob values make another schedule trace for another workload.
    void set_salt(const std::string &s) { salt = s; }

    /// Applies the config's schedule to a fresh instance. Raises CompileError for a config that
    /// breaks a constraint (naming it) and whatever the scheduling calls raise.
    void apply(apps::OperatorInstance &inst, const Config &c) const;
    /// Builds a fresh instance of `op` at `shape`, applies the config and captures the trace.
    ScheduleTrace trace(const apps::Operator &op, const std::vector<int64_t> &shape,
                        const Config &c) const;

private:
    void add_knob(Knob k);
    /// A value of knob k drawn by its weights; `except` (an index, or -1) is never drawn.
    int draw(size_t k, std::mt19937_64 &rng, int except = -1) const;
    /// Sets each implication's `then` where its `when` holds (in the order they were added).
    void imply(Config &c) const;
    /// The index of `value` in knob k's list; raises CompileError naming the knob otherwise.
    int value_index(int k, const nlohmann::json &value) const;

    std::string space_name, salt;
    std::vector<Knob> knob_list;
    std::vector<Reason> constraints;
    std::vector<std::pair<int, int>> couplings;
    struct Implication {
        int when, is, then, value; ///< knob and value indices
    };
    std::vector<Implication> implications;
    Apply apply_fn;
};

struct GpuLimits;

/// The space of `kind` for `op` at this shape on `target`. "template": the knobs of the
/// operator's generator at this shape for this target (a built-in operator's template, CPU or
/// GPU, or a user generator's ctx.knob; GPU knobs within `gpu_limits`), else the automatic CPU
/// space (autotune/AutoSpace.h), or on a target with a GPU API a CompileError pointing at
/// "auto". "auto": the automatic space, CPU or GPU.
SearchSpace space_for(const apps::Operator &op, const std::vector<int64_t> &shape,
                      const std::string &kind, const Target &target,
                      const GpuLimits *gpu_limits = nullptr);

/// A stable 64-bit FNV-1a digest as 16 hex digits.
std::string hex_digest(const std::string &text);

} // namespace kiln::autotune
