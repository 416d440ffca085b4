// bench_driver: runs kiln_bench and the reference executables (bench_openblas, bench_onednn,
// bench_onednn_nchw, bench_halide, bench_loops) interleaved, one process per measurement, and
// prints a Markdown table. For each workload, shape and thread count it runs every implementation
// once per round, in turn, for several rounds, and keeps each implementation's best median (the
// machine's speed drifts by ~10% from minute to minute, so a round robin is fairer than running one
// implementation's measurements back to back). scripts/bench.sh builds everything and calls this.
// Exit status 1 when some result was wrong or some run failed (a missing executable is not a
// failure).
//
//   bench_driver --bin-dir DIR [--quick] [--only WORKLOAD [--shape S]] [--rounds N]
//                [--threads 1,2] [--reps R] [--impls kiln,openblas,...] [--out FILE.md]
//                [--jsonl FILE] [--tuned-db FILE]
// --tuned-db FILE adds the column kiln_tuned: kiln_bench --db FILE, the best schedule the tuning
// database holds for each row at that thread count (kiln tune ... --db FILE made it), and the
// ratio column "kiln_tuned / best other". Rows the database has no record for show "error" with
// the reason under the table. The column kiln_packed (conv2d rows only, n/a elsewhere) is
// kiln_bench --packed-weights: conv2d_packed on weights packed once, untimed, as the oneDNN
// columns reorder theirs once. The column kiln_nhwc (conv2d rows only) is kiln_bench --nhwc:
// conv2d_nhwc, input and output channels innermost, on packed weights, the layouts the onednn
// column runs its brgemm convolution on, none of whose conversions it times. Every kiln-side
// column has its own ratio column.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

[[noreturn]] void usage_error(const std::string &m) {
    std::fprintf(stderr, "bench_driver: %s\n", m.c_str());
    std::exit(2);
}

struct Row {
    std::string workload, shape;
};

struct Impl {
    std::string name, exe;
    std::string extra_args; // after the protocol's arguments, e.g. " --db 'tuned.db'"
    bool present = false;
    std::set<std::string> workloads; // from --list; empty with `list_ok` false means "try all"
    bool list_ok = false;
};

struct Cell {
    bool ran = false;   // at least one run produced a JSON line
    bool wrong = false; // some round printed checked:false
    std::string error;  // last failure without a JSON line
    double best_ms = INFINITY, rate = 0, err = 0, work = 0;
    double best_cpu_ms = INFINITY; // the process's CPU time per run, when the executable reports it
    std::string unit, note;
};

struct Result {
    int rc = -1;
    std::string out, err;
};

std::string shell_quote(const std::string &s) {
    std::string r = "'";
    for (char c : s) {
        if (c == '\'')
            r += "'\\''";
        else
            r += c;
    }
    return r + "'";
}

/// Runs a command line through the shell, capturing stdout and stderr (stderr via a temp file).
Result run_command(const std::string &cmd) {
    char tmpl[] = "/tmp/bench_driver_XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) usage_error("cannot create a temporary file in /tmp");
    close(fd);
    std::string full = cmd + " 2>" + shell_quote(tmpl);
    Result r;
    FILE *f = popen(full.c_str(), "r");
    if (!f) usage_error("cannot run: " + cmd);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        r.out.append(buf, n);
    int status = pclose(f);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status)
                             : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    std::ifstream e(tmpl);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    std::remove(tmpl);
    return r;
}

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> parts;
    std::string cur;
    std::stringstream ss(s);
    while (std::getline(ss, cur, sep)) {
        if (!cur.empty()) parts.push_back(cur);
    }
    return parts;
}

std::string last_line(const std::string &s) {
    std::vector<std::string> lines = split(s, '\n');
    return lines.empty() ? std::string() : lines.back();
}

std::string fmt(double v, int prec) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return b;
}

std::string fmt_rate(double r) {
    return r >= 100 ? fmt(r, 0) : r >= 10 ? fmt(r, 1) : fmt(r, 2);
}
std::string fmt_ms(double ms) {
    return ms >= 100 ? fmt(ms, 0) : ms >= 10 ? fmt(ms, 1) : ms >= 1 ? fmt(ms, 2) : fmt(ms, 3);
}

bool kiln_side(const std::string &impl) {
    return impl == "kiln" || impl == "kiln_tuned" || impl == "kiln_packed" || impl == "kiln_nhwc";
}

/// The ratio cells of a row: the best other time over the time of each kiln-side column
/// (`kiln_cols`, in the table's order).
std::string ratio_cells(const std::map<std::string, double> &kiln_ms, double best_other,
                        const std::string &best_other_name,
                        const std::vector<std::string> &kiln_cols) {
    std::string cells;
    for (const std::string &k : kiln_cols) {
        auto it = kiln_ms.find(k);
        if (it != kiln_ms.end() && std::isfinite(it->second) && std::isfinite(best_other)) {
            cells += " " + fmt(best_other / it->second, 2) + " (vs " + best_other_name + ") |";
        } else {
            cells += " – |";
        }
    }
    return cells;
}

} // namespace

int main(int argc, char **argv) {
    std::string bin_dir = ".", only, shape, out_md, out_jsonl, tuned_db;
    bool quick = false;
    int rounds = -1, reps = -1;
    std::vector<int> threads = {1, 2};
    std::vector<std::string> impl_names = {"kiln",   "kiln_packed", "kiln_nhwc", "openblas",
                                           "onednn", "onednn_nchw", "halide",    "loops"};
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto need = [&]() -> std::string {
            if (i + 1 >= argc) usage_error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--bin-dir")
            bin_dir = need();
        else if (a == "--quick")
            quick = true;
        else if (a == "--only")
            only = need();
        else if (a == "--shape")
            shape = need();
        else if (a == "--rounds")
            rounds = std::atoi(need().c_str());
        else if (a == "--reps")
            reps = std::atoi(need().c_str());
        else if (a == "--out")
            out_md = need();
        else if (a == "--jsonl")
            out_jsonl = need();
        else if (a == "--impls")
            impl_names = split(need(), ',');
        else if (a == "--tuned-db")
            tuned_db = need();
        else if (a == "--threads") {
            threads.clear();
            for (const std::string &t : split(need(), ','))
                threads.push_back(std::atoi(t.c_str()));
        } else if (a == "--help" || a == "-h") {
            std::printf("usage: bench_driver --bin-dir DIR [--quick] [--only WORKLOAD [--shape S]] "
                        "[--rounds N] [--threads 1,2] [--reps R] [--impls a,b] [--out FILE.md] "
                        "[--jsonl FILE] [--tuned-db FILE]\n");
            return 0;
        } else {
            usage_error("unknown argument '" + a + "'; try --help");
        }
    }
    bool tuned_named =
        std::find(impl_names.begin(), impl_names.end(), "kiln_tuned") != impl_names.end();
    if (!tuned_db.empty() && !tuned_named) {
        auto kiln_at = std::find(impl_names.begin(), impl_names.end(), "kiln");
        impl_names.insert(kiln_at == impl_names.end() ? impl_names.begin() : kiln_at + 1,
                          "kiln_tuned");
    } else if (tuned_db.empty() && tuned_named) {
        usage_error("kiln_tuned runs the schedules of a tuning database: give --tuned-db FILE");
    }
    if (rounds < 0) rounds = quick ? 1 : 3;
    if (reps < 0) reps = quick ? 5 : 50;
    const double min_time = quick ? 0.1 : 0.5;
    for (int t : threads) {
        if (t < 1)
            usage_error("--threads takes a comma-separated list of positive counts, e.g. 1,2");
    }

    // Shapes: the full set, or small ones for a smoke run.
    std::vector<Row> rows;
    if (quick) {
        rows = {{"matmul", "256x256x256"}, {"matmul", "100x120x140"}, {"conv2d", "1x16x28x28x16"},
                {"blur", "512x512"},       {"blur_u16", "512x512"},   {"softmax", "256x1024"},
                {"layernorm", "256x1024"}};
    } else {
        // 4096x64x4096: a skinny matmul (M = K = 4096, N = 64). 1x256x14x14x256: a late
        // ResNet layer (many channels, a small image).
        rows = {{"matmul", "512x512x512"},         {"matmul", "1024x1024x1024"},
                {"matmul", "2048x2048x2048"},      {"matmul", "1000x1000x1000"},
                {"matmul", "4096x64x4096"},        {"matmul_u8s8", "1024x1024x1024"},
                {"matmul_u8s8", "2048x2048x2048"}, {"matmul_bf16", "1024x1024x1024"},
                {"matmul_bf16", "2048x2048x2048"}, {"conv2d", "1x64x56x56x64"},
                {"conv2d", "1x256x14x14x256"},     {"blur", "4096x4096"},
                {"blur_u16", "4096x4096"},         {"softmax", "4096x4096"},
                {"layernorm", "4096x4096"}};
    }
    if (!shape.empty()) {
        if (only.empty()) usage_error("--shape " + shape + " needs --only WORKLOAD");
        rows = {{only, shape}};
    }
    if (!only.empty()) {
        std::vector<Row> kept;
        for (const Row &r : rows) {
            if (r.workload == only) kept.push_back(r);
        }
        if (kept.empty()) {
            std::string names;
            for (const Row &r : rows) {
                if (names.find(r.workload) == std::string::npos)
                    names += (names.empty() ? "" : ", ") + r.workload;
            }
            usage_error("--only '" + only +
                        "' is not a benchmarked workload; choose one of: " + names);
        }
        rows = kept;
    }

    std::vector<Impl> impls;
    for (const std::string &n : impl_names) {
        Impl im;
        im.name = n;
        im.exe = bin_dir + "/" + (kiln_side(n) ? std::string("kiln_bench") : "bench_" + n);
        if (n == "kiln_tuned") im.extra_args = " --db " + shell_quote(tuned_db);
        if (n == "kiln_packed") im.extra_args = " --packed-weights";
        if (n == "kiln_nhwc") im.extra_args = " --nhwc";
        im.present = access(im.exe.c_str(), X_OK) == 0;
        if (im.present) {
            Result r = run_command(shell_quote(im.exe) + " --list" + im.extra_args);
            if (r.rc == 0) {
                im.list_ok = true;
                for (const std::string &line : split(r.out, '\n')) {
                    std::string first = line.substr(0, line.find_first_of(" \t"));
                    if (!first.empty()) im.workloads.insert(first);
                }
            }
        } else {
            std::fprintf(stderr,
                         "bench_driver: %s is missing (%s not built); its column shows 'missing'\n",
                         n.c_str(), im.exe.c_str());
        }
        impls.push_back(im);
    }

    std::ofstream jsonl;
    if (!out_jsonl.empty()) jsonl.open(out_jsonl);

    // results[row index][threads][impl]
    std::map<std::tuple<size_t, int, std::string>, Cell> cells;
    for (size_t ri = 0; ri < rows.size(); ri++) {
        const Row &row = rows[ri];
        for (int t : threads) {
            for (int round = 0; round < rounds; round++) {
                for (const Impl &im : impls) {
                    if (!im.present) continue;
                    if (im.list_ok && !im.workloads.count(row.workload)) continue;
                    std::string cmd = "timeout 600 " + shell_quote(im.exe) + " --workload " +
                                      row.workload + " --shape " + row.shape + " --threads " +
                                      std::to_string(t) + " --reps " + std::to_string(reps) +
                                      " --min-time " + fmt(min_time, 2) + im.extra_args;
                    Result r = run_command(cmd);
                    Cell &c = cells[{ri, t, im.name}];
                    json j;
                    bool parsed = false;
                    for (const std::string &line : split(r.out, '\n')) {
                        if (line.empty() || line[0] != '{') continue;
                        try {
                            j = json::parse(line);
                            parsed = j.contains("median_ms");
                        } catch (const json::exception &) {
                            parsed = false;
                        }
                    }
                    if (!parsed) {
                        std::string why = last_line(r.err);
                        if (why.empty()) why = "exit status " + std::to_string(r.rc);
                        if (r.rc == 124) why = "timed out after 600 s";
                        c.error = why;
                        std::fprintf(stderr, "  %-8s %-8s %-16s T=%d round %d: FAILED (%s)\n",
                                     im.name.c_str(), row.workload.c_str(), row.shape.c_str(), t,
                                     round + 1, why.c_str());
                        continue;
                    }
                    if (jsonl.is_open()) jsonl << j.dump() << "\n";
                    c.ran = true;
                    bool checked = j.value("checked", false);
                    double ms = j.value("median_ms", INFINITY);
                    c.unit = j.value("unit", "");
                    c.work = j.value("work", 0.0);
                    c.note = j.value("note", "");
                    if (!checked) c.wrong = true;
                    if (checked && ms < c.best_ms) {
                        c.best_ms = ms;
                        c.rate = j.value("rate", 0.0);
                        c.err = j.value("max_rel_err", 0.0);
                    }
                    double cpu = j.value("cpu_ms", 0.0);
                    if (checked && cpu > 0 && cpu < c.best_cpu_ms) c.best_cpu_ms = cpu;
                    std::fprintf(stderr, "  %-8s %-8s %-16s T=%d round %d: %8.3f ms %8.1f %s%s\n",
                                 im.name.c_str(), row.workload.c_str(), row.shape.c_str(), t,
                                 round + 1, ms, j.value("rate", 0.0), c.unit.c_str(),
                                 checked ? "" : "  WRONG RESULT");
                }
            }
        }
    }

    // The table.
    bool with_tuned = !tuned_db.empty();
    std::vector<std::string> kiln_cols;
    std::string ratio_heads, ratio_rule;
    for (const Impl &im : impls) {
        if (!kiln_side(im.name)) continue;
        kiln_cols.push_back(im.name);
        ratio_heads += " " + im.name + " / best other |";
        ratio_rule += "---:|";
    }
    ratio_rule += "\n";
    std::ostringstream md;
    md << "| workload | shape | threads |";
    for (const Impl &im : impls)
        md << " " << im.name << " |";
    md << ratio_heads << "\n|---|---|---|";
    for (size_t i = 0; i < impls.size(); i++)
        md << "---:|";
    md << ratio_rule;
    std::vector<std::string> footnotes;
    std::set<std::string> noted;
    bool any_failure = false; // a wrong result or a failed run: the exit status says so
    for (size_t ri = 0; ri < rows.size(); ri++) {
        for (int t : threads) {
            md << "| " << rows[ri].workload << " | " << rows[ri].shape << " | " << t << " |";
            std::map<std::string, double> kiln_ms;
            double best_other = INFINITY;
            std::string best_other_name;
            std::set<double> works;
            for (const Impl &im : impls) {
                auto it = cells.find({ri, t, im.name});
                std::string cell;
                if (!im.present) {
                    cell = "missing";
                } else if (im.list_ok && !im.workloads.count(rows[ri].workload)) {
                    cell = "n/a";
                } else if (it == cells.end() || !it->second.ran) {
                    cell = "error";
                    any_failure = true;
                    if (it != cells.end()) {
                        footnotes.push_back(im.name + " " + rows[ri].workload + " " +
                                            rows[ri].shape + " T=" + std::to_string(t) + ": " +
                                            it->second.error);
                    }
                } else if (!std::isfinite(it->second.best_ms)) {
                    cell = "**WRONG**";
                    any_failure = true;
                    footnotes.push_back(im.name + " " + rows[ri].workload + " " + rows[ri].shape +
                                        " T=" + std::to_string(t) +
                                        ": result failed the check in every round");
                } else {
                    const Cell &c = it->second;
                    cell = fmt_rate(c.rate) + " " + c.unit + " (" + fmt_ms(c.best_ms) + " ms)";
                    if (c.wrong) {
                        cell += " **!**";
                        any_failure = true;
                        footnotes.push_back(im.name + " " + rows[ri].workload + " " +
                                            rows[ri].shape + " T=" + std::to_string(t) +
                                            ": some round failed the check");
                    }
                    works.insert(c.work);
                    if (kiln_side(im.name)) {
                        kiln_ms[im.name] = c.best_ms;
                    } else if (c.best_ms < best_other) {
                        best_other = c.best_ms;
                        best_other_name = im.name;
                    }
                    if (!c.note.empty() && !noted.count(im.name + rows[ri].workload)) {
                        noted.insert(im.name + rows[ri].workload);
                        footnotes.push_back(im.name + " " + rows[ri].workload + ": " + c.note);
                    }
                }
                md << " " << cell << " |";
            }
            if (works.size() > 1 && !noted.count("work " + rows[ri].workload + rows[ri].shape)) {
                noted.insert("work " + rows[ri].workload + rows[ri].shape);
                footnotes.push_back(
                    rows[ri].workload + " " + rows[ri].shape +
                    ": implementations report different work per run; compare the ms");
            }
            md << ratio_cells(kiln_ms, best_other, best_other_name, kiln_cols) << "\n";
        }
    }
    md << "\nEach cell: rate (GF/s = 10^9 flops/s; GOP/s = 10^9 integer operations/s; GB/s = "
          "bytes read + written per second) and the "
          "median time of one run in ms, the best median of "
       << rounds << " interleaved round" << (rounds == 1 ? "" : "s")
       << ". 'kiln / best other' is the best other time divided by kiln's time (above 1: kiln is "
          "faster). Every result is checked against a plain-loop reference before it is timed; "
          "**WRONG** marks a result that failed the check.\n";
    if (std::find(kiln_cols.begin(), kiln_cols.end(), "kiln_packed") != kiln_cols.end()) {
        md << "kiln_packed: conv2d_packed on weights packed once, untimed, by the conv2d_pack "
              "kernel (kiln_bench --packed-weights), as the oneDNN columns reorder their weights "
              "once; the input and output stay NCHW and their conversions are timed, as in "
              "onednn_nchw.\n";
    }
    if (std::find(kiln_cols.begin(), kiln_cols.end(), "kiln_nhwc") != kiln_cols.end()) {
        md << "kiln_nhwc: conv2d_nhwc (kiln_bench --nhwc), input and output channels innermost, "
              "on weights packed once, untimed: the layouts the onednn column's convolution runs "
              "on (acdb), whose conversions from and to NCHW it does not time either.\n";
    }
    if (with_tuned) {
        md << "kiln_tuned: the best schedule " << tuned_db
           << " holds for the row at that thread count (kiln_bench --db).\n";
    }

    // Single-threaded runs again, by CPU time: on a machine shared with other work a process's
    // CPU time per run is much steadier than its wall time (it does not count the time the process
    // waited for a core), so this table ranks implementations more reliably there.
    if (std::find(threads.begin(), threads.end(), 1) != threads.end()) {
        md << "\nSingle thread, by CPU time of the process per run (rate and ms; '–' where the "
              "executable does not report it):\n\n| workload | shape |";
        for (const Impl &im : impls)
            md << " " << im.name << " |";
        md << ratio_heads << "\n|---|---|";
        for (size_t i = 0; i < impls.size(); i++)
            md << "---:|";
        md << ratio_rule;
        for (size_t ri = 0; ri < rows.size(); ri++) {
            md << "| " << rows[ri].workload << " | " << rows[ri].shape << " |";
            std::map<std::string, double> kiln_ms;
            double best_other = INFINITY;
            std::string best_other_name;
            for (const Impl &im : impls) {
                auto it = cells.find({ri, 1, im.name});
                if (it == cells.end() || !std::isfinite(it->second.best_cpu_ms)) {
                    md << " – |";
                    continue;
                }
                const Cell &c = it->second;
                md << " " << fmt_rate(c.work / (c.best_cpu_ms * 1e6)) << " " << c.unit << " ("
                   << fmt_ms(c.best_cpu_ms) << " ms) |";
                if (kiln_side(im.name)) {
                    kiln_ms[im.name] = c.best_cpu_ms;
                } else if (c.best_cpu_ms < best_other) {
                    best_other = c.best_cpu_ms;
                    best_other_name = im.name;
                }
            }
            md << ratio_cells(kiln_ms, best_other, best_other_name, kiln_cols) << "\n";
        }
    }
    if (!footnotes.empty()) {
        md << "\nNotes:\n";
        for (const std::string &f : footnotes)
            md << "- " << f << "\n";
    }
    std::cout << md.str();
    if (!out_md.empty()) {
        std::ofstream f(out_md, std::ios::app);
        f << md.str();
    }
    return any_failure ? 1 : 0;
}
