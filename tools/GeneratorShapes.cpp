#include "tools/GeneratorShapes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/Operator.h"
#include "autotune/GeneratorOperator.h"
#include "autotune/Tuner.h"
#include "codegen/AOT.h"
#include "driver/Generator.h"
#include "lang/Error.h"
#include "schedule/ScheduleTrace.h"
#include "tuning_db/TuningDB.h"

namespace kiln {

namespace {

using json = nlohmann::json;

struct Options {
    std::string out_dir, generator, function, file_base, db, lock, program;
    std::string emit = "static_library,c_header,metadata";
    std::vector<std::string> targets;
    std::vector<std::vector<int64_t>> shapes;
    std::map<std::string, std::string> params;
    int threads = 0; ///< the tuning target key's threads; 0: autotune::default_threads()
    bool lock_update = false;
};

Options parse(int argc, char **argv) {
    Options o;
    o.program = argc > 0 ? argv[0] : "generator";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--kiln-lock-update") {
            o.lock_update = true;
            continue;
        }
        if (a == "-o" || a == "-g" || a == "-f" || a == "-n" || a == "-t" || a == "-e" ||
            a == "--shapes" || a == "--db" || a == "--lock" || a == "--threads") {
            if (i + 1 >= argc) user_error("option ", a, " needs a value");
            std::string v = argv[++i];
            if (a == "-o") o.out_dir = v;
            if (a == "-g") o.generator = v;
            if (a == "-f") o.function = v;
            if (a == "-n") o.file_base = v;
            if (a == "-t") o.targets.push_back(v);
            if (a == "-e") o.emit = v;
            if (a == "--db") o.db = v;
            if (a == "--lock") o.lock = v;
            if (a == "--threads") {
                char *end = nullptr;
                long n = std::strtol(v.c_str(), &end, 10);
                if (v.empty() || *end || n < 1 || n > 4096)
                    user_error("--threads ", v,
                               ": the thread count the shapes were tuned with, a positive "
                               "integer (kiln tune --threads)");
                o.threads = int(n);
            }
            if (a == "--shapes") {
                std::stringstream s(v);
                std::string item;
                while (std::getline(s, item, ','))
                    o.shapes.push_back(parse_shape_text(item, "--shapes " + item));
            }
            continue;
        }
        size_t eq = a.find('=');
        if (eq == std::string::npos || eq == 0 || a[0] == '-')
            user_error("unexpected argument '", a,
                       "'; expected an option (-o, -g, -f, -n, -t, -e, --shapes, --db, --lock, "
                       "--threads) or key=value");
        std::string key = a.substr(0, eq);
        if (!o.params.emplace(key, a.substr(eq + 1)).second)
            user_error("generator parameter '", key, "' is given twice");
    }
    if (o.shapes.empty())
        user_error("--shapes: give the output shapes to specialize for, e.g. --shapes "
                   "4096x4096,1920x1080");
    if (!o.lock_update && o.out_dir.empty()) user_error("no output directory; pass -o DIR");
    if (o.lock_update && o.lock.empty()) user_error("--kiln-lock-update needs --lock FILE");
    if (o.lock_update && o.targets.size() > 1)
        user_error("--kiln-lock-update takes one target (-t); got ", o.targets.size());
    if (o.targets.empty()) o.targets.push_back("host");
    if (o.generator.empty()) {
        std::vector<std::string> names = generator_names();
        if (names.size() != 1)
            user_error("this program registers ", names.size(),
                       " generators; choose one with -g (GENERATOR_NAME in kiln_add_kernel)");
        o.generator = names[0];
    }
    if (o.function.empty()) o.function = o.generator;
    if (o.file_base.empty()) o.file_base = o.function;
    check_c_identifier(o.function, "function name");
    return o;
}

std::string fixed(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

/// Where a shape's schedule comes from. (clang-tidy 14 flags the implicit, noexcept move
/// constructor, whose members' moves do not throw.)
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Choice {
    std::optional<ScheduleTrace> trace;
    json source;      ///< the lockfile entry's "source" (database, run, median_ms, target)
    std::string note; ///< the header's line
    bool from_database = false;
};

class ShapeBuilder {
public:
    explicit ShapeBuilder(const Options &o)
        : o(o), spec{o.generator, o.params}, op(autotune::generator_operator(spec)) {
        for (const std::string &t : o.targets) {
            targets.push_back(Target::parse(t));
            keys.push_back(autotune::target_key(
                targets.back(), o.threads > 0 ? o.threads : autotune::default_threads()));
        }
        if (!o.lock.empty() && std::filesystem::exists(o.lock)) {
            std::ifstream in(o.lock);
            try {
                lock = json::parse(in);
            } catch (const std::exception &e) {
                user_error("lockfile ", o.lock, " is not valid JSON (", e.what(),
                           "); restore it from version control or delete it and run `kiln lock "
                           "update`");
            }
        }
        if (!o.db.empty() && std::filesystem::exists(o.db))
            db.emplace(tuning_db::Database::open_existing(o.db));
    }

    /// The `kiln lock update` command that refreshes this kernel's entries.
    std::string lock_update_command() const {
        std::string c = "kiln lock update --generator " + o.program + " " + o.generator;
        for (const auto &shape : o.shapes)
            c += " --shape " + apps::shape_to_string(shape);
        for (const auto &[k, v] : o.params)
            c += " --param " + k + "=" + v;
        if (o.threads > 0) c += " --threads " + std::to_string(o.threads);
        return c + " --db " + (o.db.empty() ? "tuning_db/kiln.db" : o.db) + " --lock " + o.lock;
    }

    void check_shape(const std::vector<int64_t> &shape) const {
        if (shape.size() != op.shape_names.size()) {
            std::string dims;
            for (const std::string &n : op.shape_names)
                dims += (dims.empty() ? "" : ", ") + n;
            user_error("shape ", apps::shape_to_string(shape), " of kernel '", o.function, "' has ",
                       shape.size(), " values, but the shape of generator '", o.generator, "' has ",
                       op.shape_names.size(), " (", dims, "); list ", op.shape_names.size(),
                       " values per shape in SHAPES");
        }
    }

    /// The best ok record of the shape on target ti's key in the database, if any. When there
    /// is none but the database has the workload on other target keys: an error when `strict`,
    /// else nullopt.
    std::optional<Choice> from_database(const std::vector<int64_t> &shape, size_t ti,
                                        bool strict = true) {
        if (!db) return std::nullopt;
        const tuning_db::TargetKey &key = keys[ti];
        tuning_db::WorkloadKey wk = autotune::workload_key(op, shape);
        std::optional<int64_t> w = db->find_workload(wk);
        if (!w) return std::nullopt;
        std::optional<int64_t> t = db->find_target(key);
        std::optional<tuning_db::BestConfig> best;
        if (t) best = db->best(*w, *t);
        if (!best && !strict) return std::nullopt;
        if (!best) {
            std::set<std::string> others;
            for (const tuning_db::RunRecord &r : db->runs(*w, 0)) {
                if (!t || r.target_id != *t) others.insert(db->target(r.target_id).key.to_string());
            }
            if (others.empty()) return std::nullopt;
            std::string list;
            for (const std::string &s : others)
                list += (list.empty() ? "'" : "', '") + s;
            user_error("database ", o.db, " holds ", op.name, " at ", apps::shape_to_string(shape),
                       " only for the target key(s) ", list, "'; this build wants '",
                       key.to_string(),
                       "' (a database from another machine or target: tune here with `kiln tune "
                       "--generator ",
                       o.program, " ", o.generator, " --shape ", apps::shape_to_string(shape),
                       "`, or build without DB to use the lockfile)");
        }
        Choice c;
        c.trace = ScheduleTrace::parse(best->config.trace_json);
        c.from_database = true;
        c.source = {{"database", o.db},
                    {"run", best->measurement.run_id},
                    {"run_uuid", best->measurement.run_uuid},
                    {"median_ms", best->measurement.median_ms},
                    {"target", key.to_string()}};
        c.note = "database " + o.db + ", run " + std::to_string(best->measurement.run_id) +
                 ", measured " + fixed(best->measurement.median_ms) + " ms (median) on " +
                 key.to_string();
        return c;
    }

    /// The lockfile's entry of the shape, if any.
    std::optional<Choice> from_lockfile(const std::vector<int64_t> &shape) const {
        std::string s = apps::shape_to_string(shape);
        if (!lock.contains("kernels") || !lock["kernels"].contains(op.name) ||
            !lock["kernels"][op.name].contains(s))
            return std::nullopt;
        const json &entry = lock["kernels"][op.name][s];
        Choice c;
        try {
            c.trace = ScheduleTrace::parse(entry.at("schedule").dump());
            c.source = entry.at("source");
        } catch (const std::exception &e) {
            user_error("lockfile ", o.lock, ": the entry of ", op.name, " at ", s,
                       " is malformed (", e.what(), "); refresh it with `", lock_update_command(),
                       "`");
        }
        const json &src = c.source;
        c.note = "lockfile " + o.lock + " (from database " + src.value("database", "?") + ", run " +
                 std::to_string(src.value("run", int64_t(0))) + ", measured " +
                 fixed(src.value("median_ms", 0.0)) + " ms (median) on " +
                 src.value("target", std::string("?")) + ")";
        return c;
    }

    /// The generator run for target ti, its schedule replaced by `trace` when given, lowered
    /// under the kernel's name in the generator's argument order.
    LoweredFunc lower(const ScheduleTrace *trace, size_t ti,
                      const std::vector<int64_t> *shape = nullptr) {
        GeneratorContext ctx(targets[ti], o.params);
        if (shape) ctx.set_tuning_shape(*shape); // a generator declaring its shape builds at it
        Pipeline p = run_generator(o.generator, ctx, false);
        if (trace) {
            remove_schedule(p.output_funcs());
            trace->apply(p.output_funcs());
        }
        LoweredFunc f = with_argument_order(p.lower(o.function), ctx.argument_order());
        // Parameters the generator does not read must name scalar Params (their values are the
        // kernel's arguments; they select the tuned workload "brighten[gain=2]").
        for (const std::string &u : ctx.unused()) {
            bool param = false;
            for (const LoweredArgument &a : f.args)
                param |= a.kind == LoweredArgument::Scalar && a.name == u;
            if (!param)
                user_error("generator '", o.generator, "' has no parameter '", u,
                           "': it does not read it and has no scalar Param of that name (check "
                           "the spelling in PARAMS)");
        }
        return f;
    }

    /// Lowers the shape's chosen schedule; a schedule that does not replay is an error naming
    /// the shape, its source and the fix.
    LoweredFunc lower_choice(const std::vector<int64_t> &shape, const Choice &c, size_t ti) {
        try {
            return lower(&*c.trace, ti, &shape);
        } catch (const CompileError &e) {
            std::string s = apps::shape_to_string(shape);
            if (c.from_database)
                user_error("the database's best schedule of ", op.name, " at ", s,
                           " does not replay on the generator (", e.what(),
                           "); re-tune with "
                           "`kiln tune --generator ",
                           o.program, " ", o.generator, " --shape ", s, "`");
            user_error("lockfile ", o.lock, ": the schedule of ", op.name, " at ", s,
                       " no longer replays on the generator (", e.what(),
                       "); refresh the lockfile from a database that has it with `",
                       lock_update_command(), "`, or re-tune with `kiln tune --generator ",
                       o.program, " ", o.generator, " --shape ", s, "`");
        }
    }

    /// The variants of target ti (one per shape, then the generic one) and their notes. A
    /// target without a record of a shape on its key falls back to the lockfile, then to the
    /// hand schedule; with several targets, a database that holds a shape for none of them but
    /// for other keys is the error from_database raises.
    void build_target(size_t ti, std::vector<LoweredFunc> &variants,
                      std::vector<std::string> &notes) {
        bool multi = targets.size() > 1;
        std::string label = o.function + (multi ? " [" + o.targets[ti] + "]" : std::string());
        for (const std::vector<int64_t> &shape : o.shapes) {
            check_shape(shape);
            std::string s = apps::shape_to_string(shape);
            std::optional<Choice> c = from_database(shape, ti, !multi);
            if (multi && !c) {
                bool any = false;
                for (size_t k = 0; k < targets.size(); k++)
                    any |= from_database(shape, k, false).has_value();
                if (!any) from_database(shape, 0, true);
            }
            std::optional<Choice> locked = from_lockfile(shape);
            bool no_record_here = !c && db && multi;
            if (!c) c = locked;
            if (!c) {
                std::string why = o.db.empty() ? "no database given"
                                  : !db
                                      ? "database " + o.db + " does not exist"
                                      : "database " + o.db + " has no record of it" +
                                            (multi ? " on " + keys[ti].to_string() : std::string());
                why += o.lock.empty() ? ", no lockfile" : ", and " + o.lock + " has no entry";
                notes.push_back("the generator's hand schedule (" + why + ")");
                variants.push_back(lower(nullptr, ti, &shape));
            } else {
                std::string note = c->note;
                if (no_record_here)
                    note += " (no record on " + keys[ti].to_string() + " in " + o.db + ")";
                if (c->from_database && locked && locked->trace &&
                    locked->trace->to_json_string() != c->trace->to_json_string())
                    note += "; " + o.lock + " holds another schedule: run `kiln lock update`";
                else if (c->from_database && !o.lock.empty() && !locked)
                    note += "; not in " + o.lock + ": run `kiln lock update`";
                notes.push_back(note);
                variants.push_back(lower_choice(shape, *c, ti));
            }
            std::printf("%s %s: %s\n", label.c_str(), s.c_str(), notes.back().c_str());
        }
        notes.push_back("the generator's hand schedule (any other shape)");
        variants.push_back(lower(nullptr, ti));
    }

    /// The output extents each shape's variant is chosen by: the shape itself, or for a
    /// generator that declares its shape (ctx.shape) its output's estimates at that shape. Two
    /// shapes with the same output extents could not be told apart: an error naming both.
    std::vector<std::vector<int64_t>> dispatch_extents() const {
        std::vector<std::vector<int64_t>> r;
        for (const std::vector<int64_t> &shape : o.shapes) {
            GeneratorContext ctx(targets[0], o.params);
            ctx.set_tuning_shape(shape);
            Pipeline p = run_generator(o.generator, ctx, false);
            if (ctx.shape_names().empty()) {
                r.push_back(shape);
            } else {
                r.emplace_back();
                for (const auto &e : p.output_funcs().at(0).estimates()) {
                    if (!e || e->first != 0)
                        user_error("generator '", o.generator,
                                   "' declares its shape, so each "
                                   "dimension of its output needs an estimate from 0 "
                                   "(Func::set_estimates): the kernel chooses its variant by "
                                   "the output's extents");
                    r.back().push_back(e->second);
                }
            }
            for (size_t k = 0; k + 1 < r.size(); k++) {
                if (r[k] == r.back())
                    user_error("shapes ", apps::shape_to_string(o.shapes[k]), " and ",
                               apps::shape_to_string(shape), " of kernel '", o.function,
                               "' both make an output of ", apps::shape_to_string(r.back()),
                               "; the kernel chooses its variant by the output's extents, so "
                               "list only one of them in SHAPES");
            }
        }
        return r;
    }

    int build() {
        std::vector<std::vector<LoweredFunc>> variants(targets.size());
        std::vector<std::vector<std::string>> notes(targets.size());
        for (size_t ti = 0; ti < targets.size(); ti++)
            build_target(ti, variants[ti], notes[ti]);
        std::vector<OutputKind> kinds;
        std::stringstream e(o.emit);
        std::string k;
        while (std::getline(e, k, ','))
            kinds.push_back(parse_output_kind(k));
        compile_shape_dispatched(variants, dispatch_extents(), notes, targets,
                                 OutputSet::in_directory(o.out_dir, o.file_base, kinds));
        return 0;
    }

    int update_lock() {
        if (o.db.empty() || !db)
            user_error("kiln lock update: the database ",
                       o.db.empty() ? std::string("(none given)") : o.db,
                       " does not exist; tune first with `kiln tune --generator ", o.program, " ",
                       o.generator, " --shape ...`");
        if (!lock.is_object()) lock = json::object();
        lock["version"] = 1;
        json &kernel = lock["kernels"][op.name];
        for (const std::vector<int64_t> &shape : o.shapes) {
            check_shape(shape);
            std::string s = apps::shape_to_string(shape);
            std::optional<Choice> c = from_database(shape, 0);
            if (!c) {
                std::printf("%s %s: no record in %s; %s\n", op.name.c_str(), s.c_str(),
                            o.db.c_str(),
                            kernel.contains(s) ? "kept the lockfile's entry" : "no entry");
                continue;
            }
            lower_choice(shape, *c, 0); // it must replay before it is locked
            kernel[s] = {{"schedule", json::parse(c->trace->to_json_string())},
                         {"source", c->source}};
            std::printf("%s %s: %s\n", op.name.c_str(), s.c_str(), c->note.c_str());
        }
        std::string path = o.lock;
        std::ofstream out(path);
        out << lock.dump(2) << "\n";
        if (!out) runtime_error("cannot write the lockfile ", path);
        std::printf("wrote %s\n", path.c_str());
        return 0;
    }

private:
    const Options &o;
    autotune::GeneratorSpec spec;
    const apps::Operator &op;
    std::vector<Target> targets;
    std::vector<tuning_db::TargetKey> keys;
    json lock;
    std::optional<tuning_db::Database> db;
};

} // namespace

bool is_generator_shapes_command(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--shapes") == 0 ||
            std::strcmp(argv[i], "--kiln-lock-update") == 0)
            return true;
    }
    return false;
}

int run_generator_lock_update(const std::string &exe, const std::string &generator,
                              const std::vector<std::string> &shapes,
                              const std::map<std::string, std::string> &params,
                              const std::string &db, const std::string &lock,
                              const std::string &target, int threads) {
    if (access(exe.c_str(), X_OK) != 0)
        runtime_error("--generator ", exe, ": ", std::strerror(errno),
                      "; give the path of a generator executable (linked with kiln::generator)");
    std::string joined;
    for (const std::string &s : shapes)
        joined += (joined.empty() ? "" : ",") + s;
    std::vector<std::string> args = {exe,        "--kiln-lock-update",
                                     "-g",       generator,
                                     "--shapes", joined,
                                     "--db",     db,
                                     "--lock",   lock,
                                     "-t",       target};
    if (threads > 0) {
        args.push_back("--threads");
        args.push_back(std::to_string(threads));
    }
    for (const auto &[k, v] : params)
        args.push_back(k + "=" + v);
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t child = fork();
    if (child < 0) runtime_error("cannot fork: ", std::strerror(errno));
    if (child == 0) {
        execv(exe.c_str(), argv.data());
        std::fprintf(stderr, "kiln: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    runtime_error("the generator executable ", exe, " was killed by signal ", WTERMSIG(status),
                  " while updating the lockfile of '", generator, "'");
}

int generator_shapes_main(int argc, char **argv) {
    const char *program = argc > 0 ? argv[0] : "generator";
    try {
        for (const std::string &e : generator_registration_errors()) {
            std::fprintf(stderr, "%s: error: %s\n", program, e.c_str());
            return 1;
        }
        Options o = parse(argc, argv);
        ShapeBuilder b(o);
        return o.lock_update ? b.update_lock() : b.build();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        return 1;
    }
}

} // namespace kiln
