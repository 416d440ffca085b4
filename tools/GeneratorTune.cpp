#include "tools/GeneratorTune.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>

#include <nlohmann/json.hpp>

#include "autotune/GeneratorOperator.h"
#include "autotune/Worker.h"
#include "driver/Generator.h"
#include "lang/Error.h"
#include "tools/StopSignals.h"

namespace kiln {

namespace {

using json = nlohmann::json;

json options_to_json(const autotune::TuneOptions &o) {
    return {{"db", o.db_path},
            {"strategy", o.strategy},
            {"space", o.space},
            {"target", o.target},
            {"trials", o.trials},
            {"time_s", o.time_s},
            {"jobs", o.jobs},
            {"threads", o.threads},
            {"seed", o.seed},
            {"resume", o.resume},
            {"budget_across_runs", o.budget_across_runs},
            {"baselines", o.baselines},
            {"remeasure", o.remeasure},
            {"min_time_ms", o.min_time_ms},
            {"timeout_s", o.timeout_s},
            {"first_timeout_s", o.first_timeout_s},
            {"compile_timeout_s", o.compile_timeout_s},
            {"progress", o.progress}};
}

autotune::TuneOptions options_from_json(const json &j) {
    autotune::TuneOptions o;
    o.db_path = j.at("db");
    o.strategy = j.at("strategy");
    o.space = j.at("space");
    o.target = j.at("target");
    o.trials = j.at("trials");
    o.time_s = j.at("time_s");
    o.jobs = j.at("jobs");
    o.threads = j.at("threads");
    o.seed = j.at("seed");
    o.resume = j.at("resume");
    o.budget_across_runs = j.at("budget_across_runs");
    o.baselines = j.at("baselines");
    o.remeasure = j.at("remeasure");
    o.min_time_ms = j.at("min_time_ms");
    o.timeout_s = j.at("timeout_s");
    o.first_timeout_s = j.at("first_timeout_s");
    o.compile_timeout_s = j.at("compile_timeout_s");
    o.progress = j.at("progress");
    return o;
}

volatile pid_t tuning_child = -1;

/// kiln's side: the terminal's Ctrl-C reaches the child too (same process group), a SIGTERM sent
/// to kiln is passed on.
void forward_terminate(int) {
    if (tuning_child > 0) kill(tuning_child, SIGTERM);
}

std::string self_path() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw RuntimeError("cannot find this executable's path (/proc/self/exe)");
    return std::string(buf, size_t(n));
}

/// Startup errors (a generator registered twice, a bad name) end either mode.
bool report_registration_errors(const char *program) {
    std::vector<std::string> errors = generator_registration_errors();
    for (const std::string &e : errors)
        std::fprintf(stderr, "%s: error: %s\n", program, e.c_str());
    return !errors.empty();
}

} // namespace

void add_param(std::map<std::string, std::string> &params, const std::string &text) {
    size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
        throw CompileError("--param " + text + ": write key=value, e.g. --param vector=16");
    std::string key = text.substr(0, eq);
    if (!params.emplace(key, text.substr(eq + 1)).second)
        throw CompileError("--param " + text + ": '" + key + "' is given twice");
}

int run_generator_tune(const std::string &exe, const GeneratorTuneRequest &r) {
    if (access(exe.c_str(), X_OK) != 0)
        throw RuntimeError("--generator " + exe + ": " + std::strerror(errno) +
                           "; give the path of a generator executable (linked with "
                           "kiln::generator)");
    json j = {{"generator", r.generator},
              {"params", r.params},
              {"options", options_to_json(r.options)},
              {"shape", r.shape},
              {"simulate", r.simulate},
              {"strategy_given", r.strategy_given},
              {"exe", exe}};
    // The executable writes one byte on this pipe when it understands --kiln-tune, so that a
    // program that is not a generator executable (it exits, silently or not) is named as such.
    int handshake[2];
    if (pipe(handshake) != 0)
        throw RuntimeError(std::string("cannot create a pipe: ") + std::strerror(errno));
    fcntl(handshake[0], F_SETFD, FD_CLOEXEC);
    j["handshake_fd"] = handshake[1];
    std::string text = j.dump();
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) throw RuntimeError(std::string("cannot fork: ") + std::strerror(errno));
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        execl(exe.c_str(), exe.c_str(), "--kiln-tune", text.c_str(), (char *)nullptr);
        std::fprintf(stderr, "kiln: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
        _exit(127);
    }
    close(handshake[1]);
    tuning_child = child;
    auto old_int = std::signal(SIGINT, SIG_IGN);
    auto old_term = std::signal(SIGTERM, forward_terminate);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
    tuning_child = -1;
    char byte = 0;
    bool answered = read(handshake[0], &byte, 1) == 1;
    close(handshake[0]);
    if (WIFEXITED(status) && !answered && WEXITSTATUS(status) != 127)
        throw RuntimeError("--generator " + exe +
                           ": this program does not serve kiln tune (it does not know "
                           "--kiln-tune); give a generator executable linked with kiln::generator");
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    int sig = WTERMSIG(status);
    throw RuntimeError("the generator executable " + exe + " was killed by signal " +
                       std::to_string(sig) + " (" + strsignal(sig) + ") while tuning '" +
                       r.generator + "'; run it alone to debug: " + exe + " -g " + r.generator +
                       " -o /tmp/" + r.generator + " [key=value ...]");
}

int generator_tune_main(const char *program, const std::string &request_json) {
    try {
        if (report_registration_errors(program)) return 1;
        json j = json::parse(request_json);
        if (j.contains("handshake_fd")) {
            int fd = j["handshake_fd"];
            (void)!write(fd, "k", 1);
            close(fd);
        }
        autotune::GeneratorSpec spec;
        spec.generator = j.at("generator");
        spec.params = j.at("params").get<std::map<std::string, std::string>>();
        const apps::Operator &op = autotune::generator_operator(spec);
        std::vector<int64_t> shape = j.at("shape").get<std::vector<int64_t>>();
        // A shape of the wrong length: make() names the output and its dimensions.
        if (shape.size() != op.shape_names.size()) op.make(shape);
        autotune::TuneOptions o = options_from_json(j.at("options"));
        o.op = op.name;
        o.shape = shape;
        if (j.value("simulate", false)) {
            autotune::SimulateOptions sim;
            sim.op = op.name;
            sim.shape = shape;
            sim.db_path = o.db_path;
            if (j.value("strategy_given", false)) sim.strategies = {o.strategy};
            sim.space = o.space;
            sim.trials = o.trials > 0 ? o.trials : 100;
            sim.threads = o.threads;
            sim.seed = o.seed;
            autotune::simulate(sim, std::cout);
            return 0;
        }
        autotune::resolve_generator_operators();
        o.command_operand =
            "--generator " + j.value("exe", std::string(program)) + " " + spec.generator;
        for (const auto &[k, v] : spec.params)
            o.command_operand += " --param " + k + "=" + v;
        o.worker_path = self_path();
        o.worker_args = {"--kiln-worker"};
        o.stop = &tools::stop_requested;
        tools::install_stop_handlers();
        autotune::TuneResult result = autotune::tune(o, std::cout, std::cerr);
        return result.interrupted ? tools::stop_exit_code : 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kiln: %s\n", e.what());
        return 1;
    }
}

int generator_worker_main(const char *program) {
    if (report_registration_errors(program)) return 1;
    autotune::resolve_generator_operators();
    return autotune::run_worker(stdin, stdout);
}

} // namespace kiln
