#include "autotune/SearchSpace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "lang/Error.h"

namespace kiln::autotune {

namespace {

std::string list_values(const Knob &k) {
    std::string out;
    for (size_t i = 0; i < k.values.size() && i < 12; i++)
        out += (i ? ", " : "") + k.values[i].dump();
    if (k.values.size() > 12) out += ", ... (" + std::to_string(k.values.size()) + " values)";
    return out;
}

/// A weight as people write it (0, 2.5), not as JSON prints a double (0.0).
std::string number(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

} // namespace

std::string hex_digest(const std::string &text) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
    return buf;
}

// --- ConfigView ---------------------------------------------------------------------------------

const nlohmann::json &ConfigView::value(const std::string &knob) const {
    int k = space.knob_index(knob);
    return space.knobs()[k].values[config.index.at(k)];
}

bool ConfigView::has(const std::string &knob) const {
    return space.has_knob(knob);
}

bool SearchSpace::has_knob(const std::string &name) const {
    return std::any_of(knob_list.begin(), knob_list.end(),
                       [&](const Knob &k) { return k.name == name; });
}

int64_t ConfigView::i(const std::string &knob) const {
    const nlohmann::json &v = value(knob);
    if (!v.is_number_integer())
        throw CompileError("config: knob '" + knob + "' of space '" + space.name() +
                           "' is not an integer knob");
    return v.get<int64_t>();
}

const std::string &ConfigView::s(const std::string &knob) const {
    const nlohmann::json &v = value(knob);
    if (!v.is_string())
        throw CompileError("config: knob '" + knob + "' of space '" + space.name() +
                           "' is not a choice knob");
    return v.get_ref<const std::string &>();
}

bool ConfigView::b(const std::string &knob) const {
    const nlohmann::json &v = value(knob);
    if (!v.is_boolean())
        throw CompileError("config: knob '" + knob + "' of space '" + space.name() +
                           "' is not a boolean knob");
    return v.get<bool>();
}

std::vector<std::string> ConfigView::perm(const std::string &knob) const {
    const nlohmann::json &v = value(knob);
    if (!v.is_array())
        throw CompileError("config: knob '" + knob + "' of space '" + space.name() +
                           "' is not a permutation knob");
    return v.get<std::vector<std::string>>();
}

// --- building -----------------------------------------------------------------------------------

int SearchSpace::knob_index(const std::string &name) const {
    for (size_t i = 0; i < knob_list.size(); i++) {
        if (knob_list[i].name == name) return int(i);
    }
    std::string names;
    for (const Knob &k : knob_list)
        names += (names.empty() ? "" : ", ") + k.name;
    throw CompileError("config: space '" + space_name + "' has no knob '" + name +
                       "'; its knobs are: " + names);
}

void SearchSpace::add_knob(Knob k) {
    if (k.values.empty())
        throw CompileError("search space '" + space_name + "': knob '" + k.name +
                           "' has no values; widen its range");
    for (const Knob &o : knob_list) {
        if (o.name == k.name)
            throw CompileError("search space '" + space_name + "': knob '" + k.name +
                               "' is defined twice");
    }
    knob_list.push_back(std::move(k));
}

void SearchSpace::add_divisors(const std::string &name, int64_t n, int64_t lo, int64_t hi) {
    Knob k{name, Knob::Kind::integer, {}, {}};
    for (int64_t d = std::max<int64_t>(1, lo); d <= std::min(n, hi); d++) {
        if (n % d == 0) k.values.push_back(d);
    }
    add_knob(std::move(k));
}

int64_t floor_pow2(int64_t v) {
    int64_t p = 1;
    while (p <= v / 2)
        p *= 2;
    return p;
}

void SearchSpace::add_powers_of_two(const std::string &name, int64_t lo, int64_t hi) {
    Knob k{name, Knob::Kind::integer, {}, {}};
    for (int64_t v = std::max<int64_t>(1, lo); v <= hi; v *= 2)
        k.values.push_back(v);
    add_knob(std::move(k));
}

void SearchSpace::add_range(const std::string &name, int64_t lo, int64_t hi, int64_t step) {
    if (step <= 0)
        throw CompileError("search space '" + space_name + "': knob '" + name +
                           "' needs a positive step, got " + std::to_string(step));
    Knob k{name, Knob::Kind::integer, {}, {}};
    for (int64_t v = lo; v <= hi; v += step)
        k.values.push_back(v);
    add_knob(std::move(k));
}

void SearchSpace::add_integers(const std::string &name, const std::vector<int64_t> &values) {
    Knob k{name, Knob::Kind::integer, {}, {}};
    for (int64_t v : values)
        k.values.push_back(v);
    add_knob(std::move(k));
}

void SearchSpace::add_choice(const std::string &name, const std::vector<std::string> &values) {
    Knob k{name, Knob::Kind::choice, {}, {}};
    for (const std::string &v : values)
        k.values.push_back(v);
    add_knob(std::move(k));
}

void SearchSpace::add_bool(const std::string &name) {
    add_knob(Knob{name, Knob::Kind::boolean, {false, true}, {}});
}

void SearchSpace::add_permutation(const std::string &name, const std::vector<std::string> &items) {
    if (items.size() > 6)
        throw CompileError("search space '" + space_name + "': permutation knob '" + name +
                           "' has " + std::to_string(items.size()) +
                           " items; at most 6 are supported, fix the others");
    Knob k{name, Knob::Kind::permutation, {}, {}};
    std::vector<std::string> p = items;
    std::sort(p.begin(), p.end());
    do {
        k.values.push_back(p);
    } while (std::next_permutation(p.begin(), p.end()));
    // Put the given order first so that index 0 is the natural order.
    auto it = std::find(k.values.begin(), k.values.end(), nlohmann::json(items));
    std::rotate(k.values.begin(), it, it + 1);
    add_knob(std::move(k));
}

void SearchSpace::add_constraint(const std::string &description, Check check) {
    constraints.emplace_back([description, check = std::move(check)](const ConfigView &c) {
        return check(c) ? std::string() : description;
    });
}

void SearchSpace::add_constraint_with_reason(Reason reason) {
    constraints.push_back(std::move(reason));
}

int SearchSpace::value_index(int k, const nlohmann::json &value) const {
    const Knob &knob = knob_list[size_t(k)];
    auto it = std::find(knob.values.begin(), knob.values.end(), value);
    if (it == knob.values.end())
        throw CompileError("space '" + space_name + "': knob '" + knob.name + "' has no value " +
                           value.dump() + "; its values are " + list_values(knob));
    return int(it - knob.values.begin());
}

void SearchSpace::add_implication(const std::string &when, const nlohmann::json &is,
                                  const std::string &then, const nlohmann::json &value) {
    const int w = knob_index(when), t = knob_index(then);
    const Implication imp{w, value_index(w, is), t, value_index(t, value)};
    implications.push_back(imp);
    auto text = [](const nlohmann::json &v) {
        return v.is_string() ? v.get<std::string>() : v.dump();
    };
    const std::string needs = then + " " + text(value);
    const std::string description = is == nlohmann::json(true) ? when + " needs " + needs
                                    : is == nlohmann::json(false)
                                        ? then + " is " + text(value) + " without " + when
                                        : when + " " + text(is) + " needs " + needs;
    constraints.emplace_back([imp, description](const ConfigView &c) {
        const std::vector<int> &index = c.config.index;
        return index.at(size_t(imp.when)) == imp.is && index.at(size_t(imp.then)) != imp.value
                   ? description
                   : std::string();
    });
}

void SearchSpace::imply(Config &c) const {
    for (const Implication &imp : implications)
        if (c.index[size_t(imp.when)] == imp.is) c.index[size_t(imp.then)] = imp.value;
}

void SearchSpace::add_coupling(const std::string &a, const std::string &b) {
    const int ia = knob_index(a), ib = knob_index(b);
    for (int i : {ia, ib}) {
        if (knob_list[size_t(i)].kind != Knob::Kind::integer)
            throw CompileError(
                "search space '" + space_name + "': add_coupling(\"" + a + "\", \"" + b +
                "\"): knob '" + knob_list[size_t(i)].name +
                "' is not an integer knob; only ordered (integer) knobs step together");
    }
    if (ia == ib)
        throw CompileError("search space '" + space_name + "': add_coupling(\"" + a + "\", \"" + b +
                           "\") couples a knob to itself; name two different integer knobs");
    couplings.emplace_back(ia, ib);
}

std::vector<int> SearchSpace::coupled(int knob) const {
    std::vector<int> out;
    for (const auto &[a, b] : couplings) {
        if (a == knob) out.push_back(b);
        if (b == knob) out.push_back(a);
    }
    return out;
}

// --- points -------------------------------------------------------------------------------------

int64_t SearchSpace::size() const {
    int64_t n = 1;
    for (const Knob &k : knob_list) {
        if (n > INT64_MAX / int64_t(k.values.size())) return INT64_MAX;
        n *= int64_t(k.values.size());
    }
    return n;
}

void SearchSpace::set_weights(const std::string &knob, const std::vector<double> &weights) {
    Knob &k = knob_list[size_t(knob_index(knob))];
    if (weights.size() != k.values.size())
        throw CompileError("search space '" + space_name + "': set_weights(\"" + knob + "\") got " +
                           std::to_string(weights.size()) + " weights for its " +
                           std::to_string(k.values.size()) + " values; give one per value");
    for (size_t i = 0; i < weights.size(); i++) {
        if (!(weights[i] > 0) || !std::isfinite(weights[i]))
            throw CompileError("search space '" + space_name + "': set_weights(\"" + knob +
                               "\"): the weight of " + k.values[i].dump() + " is " +
                               number(weights[i]) +
                               "; weights must be positive finite numbers (a value no draw "
                               "should reach is a constraint, not a weight)");
    }
    k.weights = weights;
}

int SearchSpace::draw(size_t k, std::mt19937_64 &rng, int except) const {
    const Knob &knob = knob_list[k];
    const int count = int(knob.values.size());
    if (knob.weights.empty()) {
        if (except < 0) return std::uniform_int_distribution<int>(0, count - 1)(rng);
        const int v = std::uniform_int_distribution<int>(0, count - 2)(rng);
        return v >= except ? v + 1 : v;
    }
    std::vector<double> w = knob.weights;
    if (except >= 0) w[size_t(except)] = 0;
    return int(std::discrete_distribution<int>(w.begin(), w.end())(rng));
}

Config SearchSpace::random(std::mt19937_64 &rng) const {
    Config c;
    for (size_t k = 0; k < knob_list.size(); k++)
        c.index.push_back(draw(k, rng));
    imply(c);
    return c;
}

Config SearchSpace::at(int64_t i) const {
    Config c;
    c.index.resize(knob_list.size());
    for (size_t k = knob_list.size(); k-- > 0;) {
        int64_t n = int64_t(knob_list[k].values.size());
        c.index[k] = int(i % n);
        i /= n;
    }
    return c;
}

std::string SearchSpace::violated(const Config &c) const {
    ConfigView view(*this, c);
    for (const Reason &reason : constraints) {
        std::string why = reason(view);
        if (!why.empty()) return why;
    }
    return "";
}

int SearchSpace::violations(const Config &c) const {
    ConfigView view(*this, c);
    int broken = 0;
    for (const Reason &reason : constraints)
        broken += !reason(view).empty();
    return broken;
}

std::optional<Config> SearchSpace::repair(const Config &c, std::mt19937_64 &rng, int steps) const {
    if (valid(c)) return c;
    Config current = c;
    imply(current);
    int broken = violations(current);
    const int n = int(knob_list.size());
    for (int step = 0; broken > 0 && n > 0 && step < steps; step++) {
        const int k = std::uniform_int_distribution<int>(0, n - 1)(rng);
        const int count = int(knob_list[size_t(k)].values.size());
        if (count < 2) continue;
        Config next = current;
        next.index[size_t(k)] = draw(size_t(k), rng, current.index[size_t(k)]);
        imply(next);
        const int b = violations(next);
        if (b <= broken) {
            current = std::move(next);
            broken = b;
        }
    }
    if (broken > 0) return std::nullopt;
    return current;
}

nlohmann::json SearchSpace::to_json(const Config &c) const {
    nlohmann::json j = nlohmann::json::object();
    for (size_t k = 0; k < knob_list.size(); k++)
        j[knob_list[k].name] = knob_list[k].values.at(c.index.at(k));
    return j;
}

Config SearchSpace::from_json(const nlohmann::json &j) const {
    if (!j.is_object())
        throw CompileError("config for space '" + space_name +
                           "' must be a JSON object of knob name -> value, got " + j.dump());
    for (const auto &[key, value] : j.items()) {
        (void)value;
        knob_index(key); // raises for an unknown knob
    }
    Config c;
    for (const Knob &k : knob_list) {
        if (!j.contains(k.name))
            throw CompileError("config for space '" + space_name + "' misses knob '" + k.name +
                               "'; give one of: " + list_values(k));
        auto it = std::find(k.values.begin(), k.values.end(), j[k.name]);
        if (it == k.values.end())
            throw CompileError("config: knob '" + k.name + "' of space '" + space_name +
                               "' must be one of " + list_values(k) + ", got " + j[k.name].dump());
        c.index.push_back(int(it - k.values.begin()));
    }
    std::string broken = violated(c);
    if (!broken.empty())
        throw CompileError("config " + j.dump() + " breaks the constraint '" + broken +
                           "' of space '" + space_name + "'");
    return c;
}

std::string SearchSpace::hash(const Config &c) const {
    return hex_digest(space_name + ":" + salt + ":" + to_json(c).dump());
}

void SearchSpace::apply(apps::OperatorInstance &inst, const Config &c) const {
    std::string broken = violated(c);
    if (!broken.empty())
        throw CompileError("config " + to_json(c).dump() + " breaks the constraint '" + broken +
                           "' of space '" + space_name + "'");
    if (apply_fn) apply_fn(inst, ConfigView(*this, c));
}

ScheduleTrace SearchSpace::trace(const apps::Operator &op, const std::vector<int64_t> &shape,
                                 const Config &c) const {
    apps::OperatorInstance inst = op.make(shape);
    apply(inst, c);
    return ScheduleTrace::capture({inst.output});
}

} // namespace kiln::autotune
