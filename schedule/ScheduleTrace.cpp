#include "schedule/ScheduleTrace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <set>
#include <sstream>

#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/Param.h"

namespace kiln {

namespace {

using json = nlohmann::json;

std::vector<FunctionPtr> roots(const std::vector<Func> &outputs) {
    std::vector<FunctionPtr> r;
    r.reserve(outputs.size());
    for (const Func &f : outputs)
        r.push_back(f.function());
    return r;
}

// The Funcs of the algorithm as written: those the outputs call.
std::vector<FunctionPtr> reachable(const std::vector<Func> &outputs) {
    return reachable_functions(roots(outputs));
}

// The Funcs whose directives make up the schedule: those, and the in() wrappers.
std::vector<FunctionPtr> scheduled(const std::vector<Func> &outputs) {
    return scheduled_functions(roots(outputs));
}

// The ImageParams the Funcs call, each once.
std::vector<std::shared_ptr<ParameterContents>> images_of(const std::vector<FunctionPtr> &funcs) {
    std::vector<std::shared_ptr<ParameterContents>> images;
    for (const FunctionPtr &f : funcs) {
        for (const auto &p : direct_image_params(f)) {
            if (std::find(images.begin(), images.end(), p) == images.end()) images.push_back(p);
        }
    }
    return images;
}

std::string hex(uint64_t v) {
    char text[24];
    std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(v));
    return text;
}

// ---------------------------------------------------------------------------------------------
// Algorithm hash

// Mixes values into a 64-bit state. Strings are hashed with FNV-1a rather than std::hash so that
// the hash does not depend on the standard library's string hash.
class Hasher {
public:
    uint64_t value() const { return h; }

    void add(uint64_t v) {
        h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ULL;
    }
    void add(const std::string &s) {
        uint64_t f = 0xcbf29ce484222325ULL;
        for (unsigned char c : s)
            f = (f ^ c) * 0x100000001b3ULL;
        add(uint64_t(s.size()));
        add(f);
    }
    void add(const Expr &e) { add(e.defined() ? uint64_t(structural_hash(e)) : 0x5eedULL); }
    void add(const Type &t) { add((uint64_t(t.code) << 32) | (uint64_t(t.bits) << 16) | t.lanes); }
    template <typename T>
    void add(const std::vector<T> &v) {
        add(uint64_t(v.size()));
        for (const T &x : v)
            add(x);
    }
    void add(const Definition &d) {
        add(d.args);
        add(d.values);
        if (d.predicate.defined()) {
            add(std::string("where"));
            add(d.predicate);
        }
        if (!d.rdom) return add(uint64_t(0));
        add(uint64_t(1));
        add(d.rdom->name);
        add(uint64_t(d.rdom->vars.size()));
        for (const ReductionVariable &v : d.rdom->vars) {
            add(v.name);
            add(v.min);
            add(v.extent);
        }
    }

private:
    uint64_t h = 0x6b696c6e5f616c67ULL;
};

// ---------------------------------------------------------------------------------------------
// What each primitive takes (lang/Directives.def), for checking traces that come from JSON

using On = PrimitiveSpec::On;
using TargetFunc = PrimitiveSpec::TargetFunc;
using OptionKind = PrimitiveSpec::OptionKind;
using VarKinds = PrimitiveSpec::VarKinds;

struct MemoryTypeSpelling {
    MemoryType type;
    const char *cpp; // the enumerator, as to_cpp prints it
};
const MemoryTypeSpelling memory_types[] = {
    {MemoryType::Auto, "Auto"},           {MemoryType::Stack, "Stack"},
    {MemoryType::Heap, "Heap"},           {MemoryType::Register, "Register"},
    {MemoryType::GPUShared, "GPUShared"},
};

// "directives[3] (split of 'blur_y.update(0)')", for messages.
std::string where(const Directive &d, size_t index) {
    std::string stage = d.stage == 0 ? "" : ".update(" + std::to_string(d.stage - 1) + ")";
    return "directives[" + std::to_string(index) + "] (" + d.primitive + " of '" + d.func + stage +
           "')";
}

// The tail strategy of a split; an omitted option means Auto.
TailStrategy tail_of(const Directive &d) {
    TailStrategy t = TailStrategy::Auto;
    if (!d.option.empty()) parse_tail_strategy(d.option, &t);
    return t;
}

// A prefetch's bound strategy; an omitted option means GuardWithIf, prefetch's default.
PrefetchBoundStrategy prefetch_strategy_of(const Directive &d) {
    PrefetchBoundStrategy s = PrefetchBoundStrategy::GuardWithIf;
    if (!d.option.empty()) parse_prefetch_strategy(d.option, &s);
    return s;
}

MemoryType memory_type_of(const Directive &d) {
    for (const MemoryTypeSpelling &m : memory_types) {
        if (d.option == memory_type_name(m.type)) return m.type;
    }
    internal_error("store_in directive with unchecked memory type '", d.option, "'");
}

// Checks that a directive has the shape its primitive takes, so that printing and replaying it
// can index its fields freely; returns its primitive.
Primitive check_directive(const Directive &d, size_t index) {
    Primitive p;
    if (!parse_primitive(d.primitive, &p)) {
        std::string known;
        for (const PrimitiveSpec &s : primitive_specs())
            known += (known.empty() ? "" : ", ") + std::string(s.name);
        user_error("schedule trace: directives[", index, "] has unknown primitive '", d.primitive,
                   "'; this kiln knows ", known);
    }
    const PrimitiveSpec *spec = &primitive_spec(p);
    std::string at = where(d, index);
    if (d.func.empty()) user_error("schedule trace: ", at, " names no Func");
    if (d.stage < 0)
        user_error("schedule trace: ", at, " has stage ", d.stage, "; stages are >= 0");
    if (spec->on == On::Func && d.stage != 0) {
        user_error("schedule trace: ", at, " is on stage ", d.stage, ", but ", d.primitive,
                   " applies to the whole Func (stage 0)");
    }
    if (spec->on == On::Update && d.stage == 0) {
        user_error("schedule trace: ", at, " is on the pure definition; ", d.primitive,
                   " applies to an update (stage >= 1)");
    }
    size_t n = d.vars.size();
    if (n > spec->max_vars && spec->min_vars != spec->max_vars) {
        std::string names;
        for (const std::string &v : d.vars)
            names += (names.empty() ? "" : ", ") + v;
        user_error("schedule trace: ", at, " takes at most ", spec->max_vars, " loops, got ", n,
                   " (", names, "); name at most ", spec->max_vars, " of them");
    }
    if (n < spec->min_vars || n > spec->max_vars) {
        std::string want = spec->min_vars == spec->max_vars
                               ? std::to_string(spec->min_vars)
                               : "at least " + std::to_string(spec->min_vars);
        user_error("schedule trace: ", at, " needs ", want, " variables, got ", n);
    }
    if (d.is_rvar.size() != n) {
        user_error("schedule trace: ", at, " has ", n, " variables but ", d.is_rvar.size(),
                   " rvar flags; give one flag per variable");
    }
    for (size_t i = 0; i < n; i++) {
        if (d.vars[i].empty()) user_error("schedule trace: ", at, " has an empty variable name");
        if (spec->vars == VarKinds::PureOnly && d.is_rvar[i]) {
            user_error("schedule trace: ", at, " names RVar '", d.vars[i], "'; ", d.primitive,
                       " takes pure Vars of the Func");
        }
        if (spec->vars == VarKinds::Funcs && d.is_rvar[i]) {
            user_error("schedule trace: ", at, " marks consumer '", d.vars[i], "' as an RVar; ",
                       d.primitive, " takes the names of consumer Funcs");
        }
    }
    if (spec->vars == VarKinds::RVarThenVar) {
        bool pairs = n % 2 == 0;
        for (size_t i = 0; pairs && i < n; i += 2)
            pairs = d.is_rvar[i] && !d.is_rvar[i + 1];
        if (!pairs) {
            user_error("schedule trace: ", at,
                       " must name pairs of an RVar and then a pure Var (none for rfactor({}))");
        }
    }
    if (d.ints.size() != spec->ints) {
        user_error("schedule trace: ", at, " needs ", spec->ints, " integers, got ", d.ints.size());
    }
    for (int64_t v : d.ints) {
        if (v < INT_MIN || v > INT_MAX) {
            user_error("schedule trace: ", at, " has integer ", v, ", which does not fit in int");
        }
    }
    if (spec->target != TargetFunc::None && d.target.empty()) {
        user_error("schedule trace: ", at, " needs a target Func name");
    }
    TailStrategy tail;
    if (spec->option == OptionKind::Tail && !d.option.empty() &&
        !parse_tail_strategy(d.option, &tail)) {
        user_error("schedule trace: ", at, " has tail strategy '", d.option,
                   "'; use one of Auto, GuardWithIf, ShiftInwards, RoundUp");
    }
    PrefetchBoundStrategy strategy;
    if (spec->option == OptionKind::Prefetch && !d.option.empty() &&
        !parse_prefetch_strategy(d.option, &strategy)) {
        user_error("schedule trace: ", at, " has prefetch bound strategy '", d.option,
                   "'; use one of Clamp, GuardWithIf, NonFaulting");
    }
    if (spec->option == OptionKind::Memory) {
        std::string legal;
        bool known = false;
        for (const MemoryTypeSpelling &m : memory_types) {
            known = known || d.option == memory_type_name(m.type);
            legal += (legal.empty() ? "" : ", ") + std::string(memory_type_name(m.type));
        }
        if (!known) {
            user_error("schedule trace: ", at, " has memory type '", d.option, "'; use one of ",
                       legal);
        }
    }
    return p;
}

// Every directive checked, with its primitive.
std::vector<Primitive> check_directives(const std::vector<Directive> &directives) {
    std::vector<Primitive> primitives;
    primitives.reserve(directives.size());
    for (size_t i = 0; i < directives.size(); i++)
        primitives.push_back(check_directive(directives[i], i));
    return primitives;
}

// ---------------------------------------------------------------------------------------------
// Reading JSON

[[noreturn]] void wrong_type(const std::string &field, const char *want, const json &got) {
    user_error("schedule trace: field '", field, "' must be ", want, ", got ", got.type_name(), " ",
               got.dump());
}

const json *member(const json &object, const std::string &key) {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

const json &require(const json &object, const std::string &key, const std::string &field) {
    const json *v = member(object, key);
    if (!v) user_error("schedule trace: missing field '", field, "'");
    return *v;
}

int64_t read_int(const json &v, const std::string &field) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
        user_error("schedule trace: field '", field, "' is ", v.dump(), ", which is too large");
    }
    if (!v.is_number_integer()) wrong_type(field, "an integer", v);
    return v.get<int64_t>();
}

std::string read_string(const json &v, const std::string &field) {
    if (!v.is_string()) wrong_type(field, "a string", v);
    return v.get<std::string>();
}

const json &read_array(const json &v, const std::string &field) {
    if (!v.is_array()) wrong_type(field, "an array", v);
    return v;
}

uint64_t read_hash(const json &v, const std::string &field) {
    std::string s = read_string(v, field);
    std::string digits = s;
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
        digits = digits.substr(2);
    }
    uint64_t h = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), h, 16);
    if (digits.empty() || digits.size() > 16 || ec != std::errc() ||
        end != digits.data() + digits.size()) {
        user_error("schedule trace: field '", field,
                   "' must be a hex string of up to 16 digits such as \"0x00c0ffee00c0ffee\", got "
                   "\"",
                   s, "\"");
    }
    return h;
}

Directive read_directive(const json &v, size_t index) {
    std::string at = "directives[" + std::to_string(index) + "]";
    if (!v.is_object()) wrong_type(at, "an object", v);
    Directive d;
    d.func = read_string(require(v, "func", at + ".func"), at + ".func");
    d.primitive = read_string(require(v, "primitive", at + ".primitive"), at + ".primitive");
    if (const json *s = member(v, "stage")) {
        int64_t stage = read_int(*s, at + ".stage");
        if (stage < 0 || stage > INT_MAX) {
            user_error("schedule trace: field '", at, ".stage' must be >= 0, got ", stage);
        }
        d.stage = int(stage);
    }
    if (const json *vars = member(v, "vars")) {
        const json &a = read_array(*vars, at + ".vars");
        for (size_t i = 0; i < a.size(); i++) {
            d.vars.push_back(read_string(a[i], at + ".vars[" + std::to_string(i) + "]"));
        }
    }
    if (const json *rvars = member(v, "rvars")) {
        const json &a = read_array(*rvars, at + ".rvars");
        for (size_t i = 0; i < a.size(); i++) {
            std::string field = at + ".rvars[" + std::to_string(i) + "]";
            if (!a[i].is_boolean()) wrong_type(field, "a boolean", a[i]);
            d.is_rvar.push_back(a[i].get<bool>());
        }
    } else {
        d.is_rvar.assign(d.vars.size(), false);
    }
    if (const json *ints = member(v, "ints")) {
        const json &a = read_array(*ints, at + ".ints");
        for (size_t i = 0; i < a.size(); i++) {
            d.ints.push_back(read_int(a[i], at + ".ints[" + std::to_string(i) + "]"));
        }
    }
    if (const json *t = member(v, "target")) d.target = read_string(*t, at + ".target");
    if (const json *o = member(v, "option")) d.option = read_string(*o, at + ".option");
    d.sequence = int64_t(index) + 1;
    check_directive(d, index);
    return d;
}

// ---------------------------------------------------------------------------------------------
// Printing C++

// The C++ variable assumed to hold a Func.
std::string cpp_identifier(const std::string &name) {
    std::string id = name;
    for (char &c : id) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    }
    if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) id = "_" + id;
    return id;
}

std::string cpp_string(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string cpp_var(const Directive &d, size_t i) {
    return std::string(d.is_rvar[i] ? "RVar(" : "Var(") + cpp_string(d.vars[i]) + ")";
}

// "Var("x"), RVar("r.x")"; a single variable of a list-taking method goes in braces, because
// the variadic overloads take two or more.
std::string cpp_var_list(const Directive &d) {
    std::string s;
    for (size_t i = 0; i < d.vars.size(); i++)
        s += (i ? ", " : "") + cpp_var(d, i);
    return d.vars.size() == 1 ? "{" + s + "}" : s;
}

// The Func, or the Stage of an update ("f.update(0)"); directives of the whole Func are on stage 0.
std::string cpp_stage(const Directive &d) {
    std::string f = cpp_identifier(d.func);
    return d.stage == 0 ? f : f + ".update(" + std::to_string(d.stage - 1) + ")";
}

// The arguments of the call that records d, in the order of its row: the variables, the
// integers, then the option ("Var(\"x\"), Var(\"xo\"), Var(\"xi\"), 8, TailStrategy::Auto").
std::string cpp_arguments(const Directive &d, const PrimitiveSpec &spec) {
    std::string s;
    if (spec.max_vars == PrimitiveSpec::Many) {
        s = cpp_var_list(d);
    } else {
        for (size_t i = 0; i < d.vars.size(); i++)
            s += (i ? ", " : "") + cpp_var(d, i);
    }
    for (int64_t v : d.ints)
        s += (s.empty() ? "" : ", ") + std::to_string(v);
    switch (spec.option) {
    case OptionKind::None:
        return s;
    case OptionKind::Tail:
        return s + (s.empty() ? "" : ", ") + "TailStrategy::" + tail_strategy_name(tail_of(d));
    case OptionKind::Memory:
        for (const MemoryTypeSpelling &m : memory_types) {
            if (m.type == memory_type_of(d))
                return s + (s.empty() ? "" : ", ") + "MemoryType::" + m.cpp;
        }
        break;
    case OptionKind::Prefetch:
        return s + (s.empty() ? "" : ", ") +
               "PrefetchBoundStrategy::" + prefetch_strategy_name(prefetch_strategy_of(d));
    }
    internal_error("printing of unchecked option '", d.option, "' of ", d.primitive);
}

// When directives[i] (a split) and the directive after it are what vectorize(x, factor) or
// unroll(x, factor) records (a split of x into x and x_vi (x_ui), then vectorize (unroll) of the
// inner loop), the name of that call; else nullptr.
const char *split_then_call(const std::vector<Directive> &directives,
                            const std::vector<Primitive> &primitives, size_t i) {
    if (i + 1 >= directives.size()) return nullptr;
    const Directive &d = directives[i], &next = directives[i + 1];
    if (next.func != d.func || next.stage != d.stage) return nullptr;
    const char *suffix = primitives[i + 1] == Primitive::vectorize ? "_vi"
                         : primitives[i + 1] == Primitive::unroll  ? "_ui"
                                                                   : nullptr;
    if (!suffix) return nullptr;
    std::string inner = d.vars[0] + suffix;
    bool rvar = d.is_rvar[0];
    bool same = d.vars[1] == d.vars[0] && d.vars[2] == inner && d.is_rvar[1] == rvar &&
                d.is_rvar[2] == rvar && next.vars[0] == inner && next.is_rvar[0] == rvar;
    return same ? primitive_name(primitives[i + 1]) : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Replaying

std::string func_names(const std::vector<FunctionPtr> &funcs) {
    std::string s;
    for (const FunctionPtr &f : funcs)
        s += (s.empty() ? "" : ", ") + f->name;
    return s;
}

std::string image_names(const std::vector<FunctionPtr> &funcs) {
    std::string s;
    for (const auto &p : images_of(funcs))
        s += (s.empty() ? "" : ", ") + p->name;
    return s.empty() ? "(none)" : s;
}

// Checks before anything is applied that every Func a directive names will exist when the
// directive is replayed: a Func of the pipeline, or one made by an earlier rfactor or in (whose
// wrapped thing may also be an ImageParam of the pipeline).
void check_func_names(const std::vector<Directive> &directives,
                      const std::vector<Primitive> &primitives,
                      const std::vector<FunctionPtr> &funcs) {
    std::set<std::string> known, images;
    for (const FunctionPtr &f : funcs)
        known.insert(f->name);
    for (const auto &p : images_of(funcs))
        images.insert(p->name);
    auto check = [&](const std::string &name, const Directive &d, size_t i, const char *role) {
        if (known.count(name)) return;
        user_error("schedule trace: ", where(d, i), " names ", role, " '", name,
                   "', which this pipeline does not have; its Funcs are ", func_names(funcs));
    };
    for (size_t i = 0; i < directives.size(); i++) {
        const Directive &d = directives[i];
        const PrimitiveSpec &spec = primitive_spec(primitives[i]);
        if (spec.vars == VarKinds::Funcs) {
            if (!known.count(d.func) && !images.count(d.func)) {
                user_error("schedule trace: ", where(d, i), " wraps '", d.func,
                           "', which this pipeline does not have; its Funcs are ",
                           func_names(funcs), " and its ImageParams ", image_names(funcs));
            }
            for (const std::string &consumer : d.vars)
                check(consumer, d, i, "consumer Func");
        } else {
            check(d.func, d, i, "Func");
        }
        if (spec.target == TargetFunc::Consumer) check(d.target, d, i, "consumer Func");
        if (spec.target == TargetFunc::NewFunc) known.insert(d.target);
        if (spec.target == TargetFunc::Prefetched && !known.count(d.target) &&
            !images.count(d.target)) {
            user_error("schedule trace: ", where(d, i), " prefetches '", d.target,
                       "', which this pipeline does not have; its Funcs are ", func_names(funcs),
                       " and its ImageParams ", image_names(funcs));
        }
    }
}

FunctionPtr find_func(const std::vector<FunctionPtr> &funcs, const std::string &name,
                      const Directive &d, size_t index) {
    for (const FunctionPtr &f : funcs) {
        if (f->name == name) return f;
    }
    user_error("schedule trace: ", where(d, index), " names Func '", name,
               "', which this pipeline does not have; its Funcs are ", func_names(funcs));
}

// The RVar an rfactor directive names, bound to its RDom when the update has one (rfactor
// itself reports a name that is not an RVar of the update).
RVar rvar_of_update(const FunctionContents &f, int stage, const std::string &name) {
    if (stage < 1 || stage > int(f.updates.size())) return RVar(name);
    const auto &rdom = f.updates[stage - 1].rdom;
    if (!rdom) return RVar(name);
    for (size_t i = 0; i < rdom->vars.size(); i++) {
        if (rdom->vars[i].name == name) return RVar(rdom, int(i));
    }
    return RVar(name);
}

// in: what is wrapped is a Func of the pipeline or, failing that, an ImageParam it calls (both
// checked before); the wrapper must get the name the trace gives it, which later directives use.
void replay_in(const Directive &d, size_t index, const std::vector<FunctionPtr> &funcs) {
    std::vector<Func> consumers;
    for (const std::string &c : d.vars)
        consumers.emplace_back(find_func(funcs, c, d, index));
    auto wrap = [&](auto wrapped) {
        return consumers.empty() ? wrapped.in() : wrapped.in(consumers);
    };
    auto f = std::find_if(funcs.begin(), funcs.end(),
                          [&](const FunctionPtr &g) { return g->name == d.func; });
    std::shared_ptr<ParameterContents> image;
    for (const auto &p : images_of(funcs)) {
        if (p->name == d.func) image = p;
    }
    internal_assert(f != funcs.end() || image, "in of unchecked '", d.func, "'");
    Func made = f != funcs.end() ? wrap(Func(*f)) : wrap(ImageParam(image));
    if (made.name() != d.target) {
        user_error("schedule trace: ", where(d, index), " names its wrapper '", d.target, "', but ",
                   d.func, ".in() made '", made.name(), "'; keep the name in() gives (",
                   made.name(), ")");
    }
}

// gpu_blocks and gpu_threads take one to three loops (checked before).
template <typename One, typename Two, typename Three>
void call_with_loops(const std::vector<VarOrRVar> &v, One one, Two two, Three three) {
    if (v.size() == 1) return one(v[0]);
    if (v.size() == 2) return two(v[0], v[1]);
    return three(v[0], v[1], v[2]);
}

void replay(const Directive &d, Primitive p, size_t index, const std::vector<FunctionPtr> &funcs) {
    if (p == Primitive::in) return replay_in(d, index, funcs);
    FunctionPtr fp = find_func(funcs, d.func, d, index);
    if (d.stage > int(fp->updates.size())) {
        user_error("schedule trace: ", where(d, index), " schedules update ", d.stage - 1, " of '",
                   d.func, "', which has ", fp->updates.size(), " update definitions");
    }
    std::vector<VarOrRVar> v;
    for (size_t i = 0; i < d.vars.size(); i++)
        v.emplace_back(d.vars[i], d.is_rvar[i]);
    Func f(fp);
    Stage s(fp, d.stage);
    using V = const VarOrRVar &;
    switch (p) {
    case Primitive::split:
        s.split(v[0], v[1], v[2], int(d.ints[0]), tail_of(d));
        return;
    case Primitive::fuse:
        s.fuse(v[0], v[1], v[2]);
        return;
    case Primitive::reorder:
        s.reorder(v);
        return;
    case Primitive::vectorize:
        s.vectorize(v[0]);
        return;
    case Primitive::unroll:
        s.unroll(v[0]);
        return;
    case Primitive::parallel:
        s.parallel(v[0]);
        return;
    case Primitive::serial:
        s.serial(v[0]);
        return;
    case Primitive::tensorize:
        s.tensorize(v[0]);
        return;
    case Primitive::gpu_blocks:
        return call_with_loops(
            v, [&](V x) { s.gpu_blocks(x); }, [&](V x, V y) { s.gpu_blocks(x, y); },
            [&](V x, V y, V z) { s.gpu_blocks(x, y, z); });
    case Primitive::gpu_threads:
        return call_with_loops(
            v, [&](V x) { s.gpu_threads(x); }, [&](V x, V y) { s.gpu_threads(x, y); },
            [&](V x, V y, V z) { s.gpu_threads(x, y, z); });
    case Primitive::gpu_single_thread:
        s.gpu_single_thread();
        return;
    case Primitive::prefetch: {
        // A Func of the pipeline or, failing that, an ImageParam it reads (checked before).
        Expr offset = int(d.ints[0]);
        for (const FunctionPtr &g : funcs) {
            if (g->name == d.target) {
                s.prefetch(Func(g), v[0], v[1], offset, prefetch_strategy_of(d));
                return;
            }
        }
        for (const auto &image : images_of(funcs)) {
            if (image->name == d.target) {
                s.prefetch(ImageParam(image), v[0], v[1], offset, prefetch_strategy_of(d));
                return;
            }
        }
        internal_error("prefetch of unchecked '", d.target, "'");
    }
    case Primitive::rfactor: {
        std::vector<std::pair<RVar, Var>> preserved;
        for (size_t i = 0; i + 1 < d.vars.size(); i += 2)
            preserved.emplace_back(rvar_of_update(*fp, d.stage, d.vars[i]), Var(d.vars[i + 1]));
        s.rfactor(preserved, d.target);
        return;
    }
    case Primitive::compute_at:
        f.compute_at(Func(find_func(funcs, d.target, d, index)), v[0]);
        return;
    case Primitive::store_at:
        f.store_at(Func(find_func(funcs, d.target, d, index)), v[0]);
        return;
    case Primitive::compute_root:
        f.compute_root();
        return;
    case Primitive::store_root:
        f.store_root();
        return;
    case Primitive::compute_inline:
        f.compute_inline();
        return;
    case Primitive::reorder_storage: {
        std::vector<Var> vars;
        for (const std::string &name : d.vars)
            vars.emplace_back(name);
        f.reorder_storage(vars);
        return;
    }
    case Primitive::bound:
        f.bound(Var(d.vars[0]), int(d.ints[0]), int(d.ints[1]));
        return;
    case Primitive::store_in:
        f.store_in(memory_type_of(d));
        return;
    case Primitive::store_nontemporal:
        f.store_nontemporal();
        return;
    case Primitive::in:
        break; // replay_in
    }
    internal_error("replay of unchecked primitive '", d.primitive, "'");
}

bool same_directive(const Directive &a, const Directive &b) {
    return a.func == b.func && a.stage == b.stage && a.primitive == b.primitive &&
           a.vars == b.vars && a.is_rvar == b.is_rvar && a.ints == b.ints && a.target == b.target &&
           a.option == b.option && a.sequence == b.sequence;
}

} // namespace

uint64_t algorithm_hash(const std::vector<Func> &outputs) {
    std::vector<FunctionPtr> funcs = reachable(outputs);
    // By name, so the order does not depend on the call graph walk (which rfactor changes).
    std::sort(funcs.begin(), funcs.end(),
              [](const FunctionPtr &a, const FunctionPtr &b) { return a->name < b->name; });
    Hasher h;
    for (const FunctionPtr &f : funcs) {
        if (f->made_by_rfactor) continue;
        h.add(f->name);
        h.add(f->args);
        h.add(f->output_types);
        h.add(f->shape);
        h.add(f->init);
        h.add(f->updates_rewritten ? f->original_updates : f->updates);
    }
    return h.value();
}

ScheduleTrace ScheduleTrace::capture(const std::vector<Func> &outputs) {
    ScheduleTrace trace;
    trace.algorithm_hash = kiln::algorithm_hash(outputs);
    for (const FunctionPtr &f : scheduled(outputs)) {
        trace.directives.insert(trace.directives.end(), f->directives.begin(), f->directives.end());
    }
    std::stable_sort(
        trace.directives.begin(), trace.directives.end(),
        [](const Directive &a, const Directive &b) { return a.sequence < b.sequence; });
    for (size_t i = 0; i < trace.directives.size(); i++) {
        trace.directives[i].sequence = int64_t(i) + 1;
    }
    return trace;
}

nlohmann::json ScheduleTrace::to_json() const {
    json directive_list = json::array();
    for (const Directive &d : directives) {
        json rvars = json::array();
        for (bool r : d.is_rvar)
            rvars.push_back(r);
        directive_list.push_back({{"func", d.func},
                                  {"stage", d.stage},
                                  {"primitive", d.primitive},
                                  {"vars", d.vars},
                                  {"rvars", rvars},
                                  {"ints", d.ints},
                                  {"target", d.target},
                                  {"option", d.option}});
    }
    return {{"schema_version", schema_version},
            {"algorithm_hash", hex(algorithm_hash)},
            {"directives", directive_list}};
}

ScheduleTrace ScheduleTrace::from_json(const nlohmann::json &j) {
    if (!j.is_object()) wrong_type("(document)", "an object", j);
    int64_t version = read_int(require(j, "schema_version", "schema_version"), "schema_version");
    if (version != schema_version) {
        user_error("schedule trace: schema version ", version,
                   " is not supported (this kiln reads version ", schema_version, ")");
    }
    ScheduleTrace trace;
    trace.algorithm_hash =
        read_hash(require(j, "algorithm_hash", "algorithm_hash"), "algorithm_hash");
    const json &list = read_array(require(j, "directives", "directives"), "directives");
    for (size_t i = 0; i < list.size(); i++)
        trace.directives.push_back(read_directive(list[i], i));
    return trace;
}

std::string ScheduleTrace::to_json_string(int indent) const {
    return to_json().dump(indent);
}

ScheduleTrace ScheduleTrace::parse(const std::string &text) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::parse_error &e) {
        user_error("schedule trace: the text is not valid JSON (", e.what(), ")");
    }
    return from_json(j);
}

std::string ScheduleTrace::to_cpp() const {
    std::vector<Primitive> primitives = check_directives(directives);
    std::ostringstream out;
    for (size_t i = 0; i < directives.size(); i++) {
        const Directive &d = directives[i];
        const PrimitiveSpec &spec = primitive_spec(primitives[i]);
        std::string stage = cpp_stage(d);
        switch (primitives[i]) {
        case Primitive::split:
            if (const char *call = split_then_call(directives, primitives, i)) {
                out << stage << "." << call << "(" << cpp_var(d, 0) << ", " << d.ints[0]
                    << ", TailStrategy::" << tail_strategy_name(tail_of(d)) << ");\n";
                i++;
                break;
            }
            out << stage << ".split(" << cpp_arguments(d, spec) << ");\n";
            break;
        case Primitive::rfactor:
            out << "Func " << cpp_identifier(d.target) << " = " << stage << ".rfactor(";
            if (d.vars.size() == 2) {
                out << cpp_var(d, 0) << ", " << cpp_var(d, 1);
            } else {
                out << "{";
                for (size_t k = 0; k + 1 < d.vars.size(); k += 2)
                    out << (k ? ", " : "") << "{" << cpp_var(d, k) << ", " << cpp_var(d, k + 1)
                        << "}";
                out << "}";
            }
            out << ", " << cpp_string(d.target) << ");\n";
            break;
        case Primitive::compute_at:
        case Primitive::store_at:
            out << stage << "." << spec.name << "(" << cpp_identifier(d.target) << ", "
                << cpp_var(d, 0) << ");\n";
            break;
        case Primitive::prefetch:
            out << stage << ".prefetch(" << cpp_identifier(d.target) << ", "
                << cpp_arguments(d, spec) << ");\n";
            break;
        case Primitive::in: {
            std::string consumers;
            for (const std::string &c : d.vars)
                consumers += (consumers.empty() ? "" : ", ") + cpp_identifier(c);
            if (d.vars.size() > 1) consumers = "{" + consumers + "}";
            out << "Func " << cpp_identifier(d.target) << " = " << cpp_identifier(d.func) << ".in("
                << consumers << ");\n";
            break;
        }
        case Primitive::fuse:
        case Primitive::reorder:
        case Primitive::vectorize:
        case Primitive::unroll:
        case Primitive::parallel:
        case Primitive::serial:
        case Primitive::tensorize:
        case Primitive::gpu_blocks:
        case Primitive::gpu_threads:
        case Primitive::gpu_single_thread:
        case Primitive::compute_root:
        case Primitive::store_root:
        case Primitive::compute_inline:
        case Primitive::reorder_storage:
        case Primitive::bound:
        case Primitive::store_in:
        case Primitive::store_nontemporal:
            out << stage << "." << spec.name << "(" << cpp_arguments(d, spec) << ");\n";
            break;
        }
    }
    return out.str();
}

void ScheduleTrace::apply(const std::vector<Func> &outputs) const {
    uint64_t have = kiln::algorithm_hash(outputs);
    if (have != algorithm_hash) {
        user_error("schedule trace: recorded for a different algorithm (hash ", hex(algorithm_hash),
                   ", this pipeline has ", hex(have), "); rebuild the pipeline it was recorded on");
    }
    std::vector<FunctionPtr> funcs = scheduled(outputs);
    for (const FunctionPtr &f : funcs) {
        if (f->directives.empty()) continue;
        user_error("schedule trace: '", f->name, "' already has ", f->directives.size(),
                   " scheduling directive", f->directives.size() == 1 ? "" : "s", " (the first is ",
                   f->directives[0].primitive,
                   "); replay a trace only on a freshly built pipeline, before any scheduling "
                   "call");
    }
    std::vector<Primitive> primitives = check_directives(directives);
    check_func_names(directives, primitives, funcs);
    for (size_t i = 0; i < directives.size(); i++) {
        replay(directives[i], primitives[i], i, funcs);
        // rfactor and in add a Func that later directives schedule.
        if (primitive_spec(primitives[i]).target == TargetFunc::NewFunc) funcs = scheduled(outputs);
    }
}

void remove_schedule(const std::vector<Func> &outputs) {
    std::vector<FunctionPtr> funcs = scheduled(outputs);
    for (const auto &p : images_of(funcs))
        p->wrappers.clear();
    for (const FunctionPtr &f : funcs) {
        f->wrappers.clear();
        f->directives.clear();
        if (f->updates_rewritten) {
            f->updates = f->original_updates;
            f->original_updates.clear();
            f->updates_rewritten = false;
        }
    }
}

bool operator==(const ScheduleTrace &a, const ScheduleTrace &b) {
    return a.algorithm_hash == b.algorithm_hash &&
           std::equal(a.directives.begin(), a.directives.end(), b.directives.begin(),
                      b.directives.end(), same_directive);
}

} // namespace kiln
