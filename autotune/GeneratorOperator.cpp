#include "autotune/GeneratorOperator.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>

#include "autotune/Checker.h"
#include "autotune/Templates.h"
#include "driver/Generator.h"
#include "lang/Error.h"
#include "lang/Function.h"
#include "schedule/InputRegions.h"
#include "schedule/ScheduleTrace.h"

namespace kiln::autotune {

namespace {

/// The names of the generator operators registered so far.
std::mutex entries_mutex;
std::set<std::string> &entries() {
    static std::set<std::string> e;
    return e;
}

/// Runs the generator; any exception it raises becomes a CompileError naming it.
Pipeline build(const GeneratorSpec &spec, GeneratorContext &ctx) {
    try {
        return run_generator(spec.generator, ctx, false);
    } catch (const InternalError &) {
        throw;
    } catch (const std::exception &e) {
        throw CompileError("generator '" + spec.generator +
                           "' failed while building its algorithm: " + e.what());
    } catch (...) {
        throw CompileError("generator '" + spec.generator +
                           "' failed while building its algorithm: it threw something that is "
                           "not a std::exception");
    }
}

/// The generator's single output Func.
Func output_of(const GeneratorSpec &spec, const Pipeline &p) {
    const std::vector<Func> &outs = p.output_funcs();
    if (outs.size() != 1 || outs[0].function()->output_types.size() != 1)
        user_error("generator '", spec.generator, "' returns ", outs.size(), " output Func(s)",
                   outs.size() == 1 ? " with several values" : "",
                   "; the tuner tunes generators with one single-valued output");
    return outs[0];
}

std::string joined(const std::vector<std::string> &items) {
    std::string r;
    for (const std::string &s : items)
        r += (r.empty() ? "" : ", ") + s;
    return r;
}

/// Sets a scalar Param from a parameter's text.
void set_scalar(const GeneratorSpec &spec, ParameterContents &p, const std::string &text) {
    char *end = nullptr;
    errno = 0;
    if (p.type.is_float()) {
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0')
            user_error("generator '", spec.generator, "': param '", p.name, "' of ", p.type,
                       " must be a number, got '", text, "'");
        p.scalar_value = make_param_value(p.type, v, 0, true);
        return;
    }
    int64_t v = 0;
    if (p.type.is_bool() && (text == "true" || text == "false")) {
        v = text == "true";
    } else {
        v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE)
            user_error("generator '", spec.generator, "': param '", p.name, "' of ", p.type,
                       " must be an integer, got '", text, "'");
    }
    p.scalar_value = make_param_value(p.type, 0, v, false);
}

/// An ImageParam handle on the contents of one the generator made.
struct ImageParamOf : ImageParam {
    explicit ImageParamOf(std::shared_ptr<ParameterContents> c) { contents = std::move(c); }
};

/// The output's region from its estimates, for a generator that declares its shape.
std::vector<int> estimated_extents(const GeneratorSpec &spec, const GeneratorContext &ctx,
                                   const Func &out) {
    std::vector<std::string> vars = out.function()->args;
    std::vector<std::optional<std::pair<int64_t, int64_t>>> est = out.estimates();
    std::vector<int> extents;
    for (size_t d = 0; d < vars.size(); d++) {
        if (!est[d]) {
            std::string example;
            for (const std::string &v : vars)
                example += std::string(example.empty() ? "" : ", ") + "{0, extent_of_" + v + "}";
            user_error("generator '", spec.generator, "' declares its shape (",
                       joined(ctx.shape_names()), ") but its output '", out.name(),
                       "' has no estimate for '", vars[d],
                       "', so the tuner does not know the region to compute; give one per "
                       "dimension: ",
                       out.name(), ".set_estimates({", example, "})");
        }
        if (est[d]->first != 0) {
            user_error("generator '", spec.generator, "': the estimate of '", vars[d],
                       "' in output '", out.name(), "' starts at ", est[d]->first,
                       "; the tuner computes outputs from 0, so give min 0");
        }
        extents.push_back(int(est[d]->second));
    }
    return extents;
}

apps::OperatorInstance make_instance(const GeneratorSpec &spec, const std::vector<int64_t> &shape) {
    // The algorithm only: its schedule is removed below, and hand_schedule and the knob space
    // rebuild the generator for the tuned target. (Operator::make takes no target; a generator
    // whose algorithm itself depends on the target sees the host here.)
    GeneratorContext ctx(Target::host(), spec.params);
    ctx.set_tuning_shape(shape); // read by a generator that declares its shape (ctx.shape)
    Pipeline p = build(spec, ctx);
    Func out = output_of(spec, p);
    std::vector<std::string> vars = out.function()->args;
    bool declared = !ctx.shape_names().empty();
    if (!declared && shape.size() != vars.size()) {
        user_error("shape '", apps::shape_to_string(shape), "' for generator '", spec.generator,
                   "' has ", shape.size(), " values, but its output '", out.name(), "' has ",
                   vars.size(), " dimensions (", joined(vars), "); give ", vars.size(),
                   " extents, e.g. --shape ",
                   apps::shape_to_string(std::vector<int64_t>(vars.size(), 256)));
    }
    remove_schedule({out});

    // Parameters the generator did not read set the scalar Params of their name.
    std::vector<std::string> unused = ctx.unused();
    std::vector<std::string> scalars;
    for (const LoweredArgument &a : pipeline_inputs({out})) {
        if (a.kind != LoweredArgument::Scalar || !a.param) continue;
        scalars.push_back(a.name);
        auto it = std::find(unused.begin(), unused.end(), a.name);
        if (it != unused.end()) {
            set_scalar(spec, *a.param, spec.params.at(a.name));
            unused.erase(it);
        } else if (!a.param->scalar_value.defined()) {
            user_error("generator '", spec.generator, "': param '", a.name,
                       "' has no value; give one with --param ", a.name,
                       "=VALUE (or a default: Param<T>(\"", a.name, "\", value))");
        }
    }
    if (!unused.empty()) {
        std::vector<std::string> quoted;
        for (const std::string &u : unused)
            quoted.push_back("'" + u + "'");
        user_error("generator '", spec.generator, "' has no parameter ", joined(quoted),
                   ": it reads no such parameter and has no Param of that name (its Params: ",
                   scalars.empty() ? "none" : joined(scalars), "); check the spelling of --param");
    }

    apps::OperatorInstance inst;
    inst.shape = shape;
    inst.output = out;
    if (declared) {
        inst.output_extents = estimated_extents(spec, ctx, out);
    } else {
        for (int64_t e : shape)
            inst.output_extents.push_back(int(e));
    }
    std::vector<InputRegion> regions = input_regions(
        {out}, std::vector<int64_t>(inst.output_extents.begin(), inst.output_extents.end()));
    // The argument order the generator asked for, then the rest in lowering order.
    std::vector<const InputRegion *> images;
    for (const std::string &name : ctx.argument_order()) {
        for (const InputRegion &r : regions) {
            if (r.argument.name == name && r.argument.kind == LoweredArgument::Buffer)
                images.push_back(&r);
        }
    }
    for (const InputRegion &r : regions) {
        if (r.argument.kind == LoweredArgument::Buffer &&
            std::find(images.begin(), images.end(), &r) == images.end())
            images.push_back(&r);
    }
    for (size_t i = 0; i < images.size(); i++) {
        const InputRegion &r = *images[i];
        std::vector<int> extents, mins;
        for (size_t d = 0; d < r.extents.size(); d++) {
            extents.push_back(int(r.extents[d]));
            mins.push_back(int(r.mins[d]));
        }
        BufferBase b(r.argument.type, extents, r.argument.name);
        b.set_min(mins);
        fill_random(b, 1000 + i);
        inst.inputs.push_back(ImageParamOf(r.argument.param));
        inst.input_data.push_back(b);
    }
    for (const FunctionPtr &f : reachable_functions({out.function()})) {
        if (f != out.function() && !f->made_by_rfactor) inst.stages.emplace_back(f);
    }
    return inst;
}

double bytes_of(const BufferBase &b) {
    return double(b.number_of_elements()) * double(b.type().bytes());
}

} // namespace

std::string generator_operator_name(const GeneratorSpec &spec) {
    if (spec.params.empty()) return spec.generator;
    std::string r = spec.generator + "[";
    bool first = true;
    for (const auto &[k, v] : spec.params) {
        r += (first ? "" : ",") + k + "=" + v;
        first = false;
    }
    return r + "]";
}

std::optional<GeneratorSpec> parse_generator_operator_name(const std::string &name) {
    GeneratorSpec spec;
    size_t open = name.find('[');
    spec.generator = name.substr(0, open);
    if (open == std::string::npos) return spec;
    if (name.back() != ']' || open + 2 >= name.size()) return std::nullopt;
    std::string body = name.substr(open + 1, name.size() - open - 2);
    std::string key;
    size_t start = 0;
    // A comma starts the next parameter only when "key=" follows it; values may hold commas.
    while (start <= body.size()) {
        size_t eq = body.find('=', start);
        if (eq == std::string::npos) return std::nullopt;
        key = body.substr(start, eq - start);
        if (key.empty()) return std::nullopt;
        size_t next = eq + 1, end = std::string::npos;
        while ((next = body.find(',', next)) != std::string::npos) {
            size_t e2 = body.find('=', next + 1);
            std::string candidate =
                e2 == std::string::npos ? "" : body.substr(next + 1, e2 - next - 1);
            bool ident =
                !candidate.empty() && std::all_of(candidate.begin(), candidate.end(), [](char c) {
                    return std::isalnum((unsigned char)c) || c == '_';
                });
            if (ident) {
                end = next;
                break;
            }
            next++;
        }
        spec.params[key] = body.substr(eq + 1, end == std::string::npos ? end : end - eq - 1);
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return spec;
}

const apps::Operator &generator_operator(const GeneratorSpec &spec) {
    std::string name = generator_operator_name(spec);
    {
        std::lock_guard<std::mutex> lock(entries_mutex);
        if (entries().count(name)) return apps::find_operator(name);
    }
    if (!has_generator(spec.generator)) {
        std::vector<std::string> names = generator_names();
        user_error("no generator called '", spec.generator, "' in this program (",
                   names.empty() ? "it registers none" : "it registers: " + joined(names), ")");
    }
    // One run to learn the output's dimensions (or declared shape) and the tolerance.
    GeneratorContext ctx(Target::host(), spec.params);
    Pipeline p = build(spec, ctx);
    Func out = output_of(spec, p);

    apps::Operator op;
    op.name = name;
    op.description = "generator '" + spec.generator + "'";
    if (ctx.shape_names().empty()) {
        op.shape_names = out.function()->args;
        op.default_shape.assign(op.shape_names.size(), 256);
    } else {
        op.shape_names = ctx.shape_names();
        op.default_shape = ctx.default_shape();
    }
    op.make = [spec, names = op.shape_names, defaults = op.default_shape,
               declared = !ctx.shape_names().empty()](const std::vector<int64_t> &shape) {
        if (declared && shape.size() != names.size()) {
            user_error("shape '", apps::shape_to_string(shape), "' for generator '", spec.generator,
                       "' has ", shape.size(), " values, but the generator's shape is ",
                       names.size(), " (", joined(names), "); give ", names.size(),
                       " values, e.g. --shape ", apps::shape_to_string(defaults));
        }
        return make_instance(spec, shape);
    };
    op.generator = [spec](GeneratorContext &c) {
        Pipeline p = build(spec, c);
        output_of(spec, p); // one single-valued output
        return p;
    };
    op.generator_params = spec.params;
    op.hand_schedule = [generator = op.generator,
                        params = spec.params](apps::OperatorInstance &inst, const Target &target) {
        apps::schedule_from_generator(generator, params, inst, target);
    };
    auto work_cache = std::make_shared<std::map<std::vector<int64_t>, double>>();
    auto cache_mutex = std::make_shared<std::mutex>();
    op.work = [spec, name, work_cache, cache_mutex](const std::vector<int64_t> &shape) {
        std::lock_guard<std::mutex> lock(*cache_mutex);
        auto it = work_cache->find(shape);
        if (it != work_cache->end()) return it->second;
        apps::OperatorInstance inst = make_instance(spec, shape);
        double bytes = bytes_of(inst.make_output());
        for (const BufferBase &b : inst.input_data)
            bytes += bytes_of(b);
        return (*work_cache)[shape] = bytes;
    };
    op.work_unit = "GB/s";
    op.tolerance = ctx.tolerance();
    {
        std::lock_guard<std::mutex> lock(entries_mutex);
        entries().insert(name);
    }
    apps::register_operator(std::move(op));
    return apps::find_operator(name);
}

void resolve_generator_operators() {
    apps::set_operator_resolver([](const std::string &name) {
        std::optional<GeneratorSpec> spec = parse_generator_operator_name(name);
        if (!spec || !has_generator(spec->generator)) return false;
        generator_operator(*spec);
        return true;
    });
}

std::optional<SearchSpace> generator_knob_space(const apps::Operator &op,
                                                const std::vector<int64_t> &shape,
                                                const Target &target, const GpuLimits *gpu_limits) {
    if (!op.generator) return std::nullopt;
    const GeneratorFunction generator = op.generator;
    const std::map<std::string, std::string> params = op.generator_params;
    const GpuLimits limits = gpu_limits ? *gpu_limits : GpuLimits{};
    // A context at this shape and target that sees the device's limits. (Applying a config
    // needs none: the portable limits it then sees are never tighter.)
    auto context = [params, target, shape, limits]() {
        GeneratorContext ctx(target, params);
        ctx.set_tuning_shape(shape);
        ctx.set_gpu_limits(limits.max_threads_per_block, limits.shared_memory_bytes);
        return ctx;
    };
    // The knobs at this shape and target: a generator may declare other values for them (tiles
    // that fit the shape, vectors of the target's width, none on a GPU target).
    std::vector<GeneratorKnob> knobs;
    {
        GeneratorContext ctx = context();
        generator(ctx);
        knobs = ctx.knobs();
    }
    if (knobs.empty()) return std::nullopt;
    SearchSpace space(op.name + (target.has_gpu() ? "_gpu" : ""));
    for (const GeneratorKnob &k : knobs) {
        auto given = params.find(k.name);
        if (k.kind == GeneratorKnob::Kind::integer) {
            space.add_integers(k.name, given != params.end()
                                           ? std::vector<int64_t>{std::stoll(given->second)}
                                           : k.integers);
        } else {
            space.add_choice(k.name, given != params.end() ? std::vector<std::string>{given->second}
                                                           : k.choices);
        }
    }
    auto values = [knobs](const ConfigView &c) {
        std::map<std::string, std::string> v;
        for (const GeneratorKnob &k : knobs)
            v[k.name] =
                k.kind == GeneratorKnob::Kind::integer ? std::to_string(c.i(k.name)) : c.s(k.name);
        return v;
    };
    // Whether the generator accepts the values (else why not): one run per config, remembered.
    auto reasons = std::make_shared<std::map<std::map<std::string, std::string>, std::string>>();
    space.add_constraint_with_reason([generator, context, values, reasons](const ConfigView &c) {
        std::map<std::string, std::string> v = values(c);
        auto it = reasons->find(v);
        if (it != reasons->end()) return it->second;
        GeneratorContext ctx = context();
        ctx.set_knob_values(v);
        std::string why;
        try {
            generator(ctx);
        } catch (const CompileError &e) {
            why = e.what();
            if (why.empty()) why = "the generator refuses these knob values";
        }
        return (*reasons)[v] = why;
    });
    space.set_apply(
        [generator, params, target, values](apps::OperatorInstance &inst, const ConfigView &c) {
            apps::schedule_from_generator(generator, params, inst, target, values(c));
        });
    return space;
}

} // namespace kiln::autotune
