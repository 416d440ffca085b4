#include "tools/DbCommands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "lang/Error.h"
#include "tuning_db/TuningDB.h"

namespace kiln {

namespace {

using namespace tuning_db;
using nlohmann::json;

const char *const kDefaultDb = "tuning_db/kiln.db";

struct Options {
    std::string db = kDefaultDb;
    std::string workload; // operator name or numeric workload id
    std::string shape;
    int64_t target = 0;
    int top = 5;
    bool trace = false;
    int history = 20;
    std::string file;
    std::string op;
    std::string output = "kiln-report.html";
};

std::string fmt_ms(std::optional<double> ms) {
    if (!ms) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g ms", *ms);
    return buf;
}

std::string fmt_time(int64_t us) {
    std::time_t t = std::time_t(us / 1000000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

bool is_number(const std::string &s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The workloads a command names: a numeric id, or an operator name with an optional shape.
std::vector<WorkloadRecord> resolve_workloads(const Database &db, const Options &o) {
    if (is_number(o.workload)) {
        int64_t id = std::stoll(o.workload);
        for (const WorkloadRecord &w : db.workloads()) {
            if (w.id == id) return {w};
        }
        runtime_error("no workload with id ", id, " in tuning database '", db.path(),
                      "'; `kiln db list` shows the ids");
    }
    std::vector<WorkloadRecord> found = db.workloads_matching(o.workload, o.shape);
    if (!found.empty()) return found;
    std::vector<WorkloadRecord> all = db.workloads();
    if (!o.shape.empty()) {
        std::string shapes;
        for (const WorkloadRecord &w : all) {
            if (w.key.op == o.workload) shapes += (shapes.empty() ? "" : ", ") + w.key.shape;
        }
        if (!shapes.empty()) {
            runtime_error("no workload '", o.workload, "' with shape '", o.shape,
                          "' in tuning database '", db.path(), "'; stored shapes: ", shapes);
        }
    }
    std::set<std::string> ops;
    for (const WorkloadRecord &w : all)
        ops.insert(w.key.op);
    std::string known;
    for (const std::string &op : ops)
        known += (known.empty() ? "" : ", ") + op;
    runtime_error("no workload for operator '", o.workload, "' in tuning database '", db.path(),
                  "'; ", known.empty() ? "the database is empty" : "stored operators: " + known,
                  " (run `kiln tune ", o.workload, "` to tune it)");
}

/// The targets with measurements or runs of the workload (only `only` when it is not 0).
std::vector<TargetRecord> targets_of(const Database &db, int64_t workload_id, int64_t only) {
    std::vector<TargetRecord> out;
    bool seen_only = false;
    for (const TargetRecord &t : db.targets()) {
        if (only && t.id != only) continue;
        seen_only = true;
        Statistics s = db.statistics({workload_id, t.id, std::nullopt});
        if (s.measurements > 0 || s.runs > 0) out.push_back(t);
    }
    if (only && !seen_only) {
        runtime_error("no target with id ", only, " in tuning database '", db.path(),
                      "'; `kiln db list` shows the targets");
    }
    return out;
}

// --- list / best / show ------------------------------------------------------------------------

void cmd_list(const Options &o, std::ostream &out) {
    Database db = Database::open_existing(o.db);
    std::vector<TargetRecord> targets = db.targets();
    std::vector<WorkloadRecord> workloads = db.workloads();
    out << "tuning database " << db.path() << "\n";
    if (workloads.empty()) {
        out << "no workloads yet; run `kiln tune OP` to add some\n";
        return;
    }
    out << "targets:\n";
    for (const TargetRecord &t : targets)
        out << "  [" << t.id << "] " << t.key.to_string() << "\n";
    out << "workloads:\n";
    // Columns as wide as their longest entry.
    std::vector<std::vector<std::string>> rows = {
        {"id", "operator", "shape", "types", "measured", "ok", "best"}};
    for (const WorkloadRecord &w : workloads) {
        rows.push_back({std::to_string(w.id), w.key.op, w.key.shape, w.key.types,
                        std::to_string(w.measurements), std::to_string(w.ok_measurements),
                        fmt_ms(w.best_ms)});
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto &row : rows) {
        for (size_t i = 0; i < row.size(); i++)
            width[i] = std::max(width[i], row[i].size());
    }
    for (const auto &row : rows) {
        out << " ";
        for (size_t i = 0; i < row.size(); i++) {
            // Numbers right-aligned, text left-aligned; the last column unpadded.
            bool numeric = i == 0 || i == 4 || i == 5;
            std::string pad(width[i] - row[i].size(), ' ');
            out << " " << (numeric ? pad + row[i] : i + 1 == row.size() ? row[i] : row[i] + pad);
        }
        out << "\n";
    }
}

/// How a config's time was decided: "spread 0.1 ms" for one measurement, else "median of 3
/// measurements, 1 ms .. 35 ms, unstable" (unstable: they disagree by more than
/// tuning_db::unstable_ratio); "closing round of run 4, " first when the time is from a standing
/// closing round (tuning_db::BestConfig).
std::string measured_text(const BestConfig &b) {
    std::string s =
        b.closing_run_id ? "closing round of run " + std::to_string(b.closing_run_id) + ", " : "";
    if (b.measurements <= 1) return s + "spread " + fmt_ms(b.measurement.spread_ms);
    s += "median of " + std::to_string(b.measurements) + " measurements, " + fmt_ms(b.min_ms) +
         " .. " + fmt_ms(b.max_ms);
    return b.unstable() ? s + ", unstable" : s;
}

void cmd_best(const Options &o, std::ostream &out) {
    Database db = Database::open_existing(o.db);
    if (o.top < 1) runtime_error("--top must be at least 1, got ", o.top);
    bool any = false;
    for (const WorkloadRecord &w : resolve_workloads(db, o)) {
        for (const TargetRecord &t : targets_of(db, w.id, o.target)) {
            std::vector<BestConfig> top = db.top_k(w.id, t.id, o.top);
            out << "workload [" << w.id << "] " << w.key.to_string() << "\n  target [" << t.id
                << "] " << t.key.to_string() << "\n";
            if (top.empty()) {
                out << "  no successful measurement yet\n";
                continue;
            }
            any = true;
            for (size_t i = 0; i < top.size(); i++) {
                const BestConfig &b = top[i];
                out << "  #" << i + 1 << "  " << fmt_ms(b.median_ms) << " (" << measured_text(b)
                    << ")  config " << b.config.hash << "  " << b.config.config_json << "\n";
                if (o.trace) out << "  trace: " << b.config.trace_json << "\n";
            }
        }
    }
    if (!any && !o.target) out << "nothing measured successfully yet\n";
}

void cmd_show(const Options &o, std::ostream &out) {
    Database db = Database::open_existing(o.db);
    for (const WorkloadRecord &w : resolve_workloads(db, o)) {
        out << "workload [" << w.id << "] " << w.key.to_string() << "\n";
        for (const TargetRecord &t : targets_of(db, w.id, o.target)) {
            out << "  target [" << t.id << "] " << t.key.to_string() << "\n";
            if (!t.key.features.empty()) out << "    features: " << t.key.features << "\n";
            Statistics s = db.statistics({w.id, t.id, std::nullopt});
            out << "    " << s.measurements << " measurements of " << s.configs << " configs (";
            bool first = true;
            for (auto &[status, n] : s.per_status) {
                out << (first ? "" : ", ") << status << " " << n;
                first = false;
            }
            // The best as `kiln db best` ranks it (a standing closing round's crown first).
            std::optional<BestConfig> best = db.best(w.id, t.id);
            out << "), best "
                << fmt_ms(best ? std::optional<double>(best->median_ms) : std::nullopt) << "\n";
            for (const Statistics::PerStrategy &p : s.per_strategy) {
                out << "    strategy " << p.strategy << ": " << p.runs << " runs, " << p.trials
                    << " trials, best " << fmt_ms(p.best_ms) << "\n";
            }
            std::vector<Measurement> h = db.history(w.id, t.id);
            std::map<int64_t, int> closing; // run -> its closing measurements
            for (const Measurement &m : h)
                closing[m.run_id] += m.closing;
            for (const RunRecord &r : db.runs(w.id, t.id)) {
                char line[256];
                std::snprintf(line, sizeof line,
                              "    run %lld: %s seed %lld, %lld trials in %.1f s, %s",
                              (long long)r.id, r.strategy.c_str(), (long long)r.seed,
                              (long long)r.trials_done, r.elapsed_s,
                              r.finished_us ? "finished" : "resumable");
                out << line << " (started " << fmt_time(r.started_us) << ")";
                if (closing[r.id] > 0) {
                    out << ", closing round of " << closing[r.id] << " measurements"
                        << (best && best->closing_run_id == r.id ? ", standing" : "");
                }
                out << "\n";
            }
            size_t from = h.size() > size_t(o.history) ? h.size() - size_t(o.history) : 0;
            out << "    history (" << (h.size() - from) << " of " << h.size()
                << ", oldest first):\n";
            for (size_t i = from; i < h.size(); i++) {
                const Measurement &m = h[i];
                out << "      " << fmt_time(m.timestamp_us) << "  " << to_string(m.status) << "  "
                    << (m.status == Status::ok ? fmt_ms(m.median_ms) : std::string("-"))
                    << "  config " << m.config_hash << (m.closing ? "  closing" : "");
                if (!m.error.empty()) {
                    std::string e = m.error.substr(0, m.error.find('\n'));
                    out << "  " << e.substr(0, 100);
                }
                out << "\n";
            }
        }
    }
}

// --- export / import ---------------------------------------------------------------------------

void cmd_export(const Options &o, std::ostream &out) {
    Database db = Database::open_existing(o.db);
    Filter filter;
    if (!o.op.empty()) {
        if (db.workloads_matching(o.op).empty())
            runtime_error("no workload for operator '", o.op, "' in tuning database '", db.path(),
                          "'; `kiln db list` shows what is stored");
        filter.op = o.op;
    }
    json doc = db.export_json(filter);
    std::string text = doc.dump(1);
    if (o.file == "-") {
        out << text << "\n";
        return;
    }
    std::ofstream f(o.file);
    if (!f) runtime_error("cannot write export file '", o.file, "'; check the directory exists");
    f << text << "\n";
    f.close();
    if (!f) runtime_error("cannot write export file '", o.file, "' (disk full?)");
    out << "exported " << doc["measurements"].size() << " measurements, " << doc["configs"].size()
        << " configs, " << doc["runs"].size() << " runs of " << doc["workloads"].size()
        << " workloads to " << o.file << "\n";
}

void cmd_import(const Options &o, std::ostream &out) {
    std::ifstream f(o.file);
    if (!f)
        runtime_error("cannot read import file '", o.file,
                      "'; it does not exist or is not readable");
    json doc;
    try {
        doc = json::parse(f);
    } catch (const json::exception &e) {
        runtime_error("import file '", o.file, "' is not JSON: ", e.what());
    }
    Database db = Database::open(o.db);
    ImportSummary s = db.import_json(doc);
    out << "imported into " << db.path() << ": " << s.measurements_added << " measurements added ("
        << s.measurements_skipped << " already present), " << s.configs_added << " configs, "
        << s.runs_added << " runs, " << s.workloads_added << " workloads, " << s.targets_added
        << " targets added\n";
    if (s.features_added > 0) out << s.features_added << " feature rows of the cost model added\n";
}

// --- report --------------------------------------------------------------------------------------

std::string html_escape(const std::string &s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        default:
            out += c;
        }
    }
    return out;
}

const char *const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct Series {
    std::string strategy;
    std::vector<std::pair<double, double>> points; // (x, best ms)
};

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

std::string tick(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

/// A line plot of the series, hand-written SVG: axes, min/max ticks, one polyline per series.
std::string svg_plot(const std::vector<Series> &series, const std::string &title,
                     const std::string &xlabel) {
    const double W = 520, H = 300, L = 64, R = 130, T = 28, B = 42;
    double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
    for (const Series &s : series) {
        for (auto [x, y] : s.points) {
            x1 = std::max(x1, x);
            y0 = std::min(y0, y);
            y1 = std::max(y1, y);
        }
    }
    if (!std::isfinite(y0)) y0 = 0, y1 = 1;
    if (y1 - y0 < 1e-9) {
        y0 = y0 * 0.9;
        y1 = y1 * 1.1 + 1e-9;
    }
    auto sx = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
    auto sy = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
    std::ostringstream s;
    s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" viewBox=\"0 0 " << W << " " << H << "\" role=\"img\">\n";
    s << "<text x=\"" << L << "\" y=\"18\" font-size=\"13\" font-weight=\"bold\">"
      << html_escape(title) << "</text>\n";
    s << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B
      << "\" stroke=\"#333\"/>\n";
    s << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B
      << "\" stroke=\"#333\"/>\n";
    for (double y : {y0, (y0 + y1) / 2, y1}) {
        s << "<text x=\"" << L - 6 << "\" y=\"" << num(sy(y) + 4)
          << "\" font-size=\"11\" text-anchor=\"end\">" << tick(y) << "</text>\n";
        s << "<line x1=\"" << L << "\" y1=\"" << num(sy(y)) << "\" x2=\"" << W - R << "\" y2=\""
          << num(sy(y)) << "\" stroke=\"#ddd\"/>\n";
    }
    for (double x : {x0, (x0 + x1) / 2, x1}) {
        s << "<text x=\"" << num(sx(x)) << "\" y=\"" << H - B + 16
          << "\" font-size=\"11\" text-anchor=\"middle\">" << tick(x) << "</text>\n";
    }
    s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 6
      << "\" font-size=\"12\" text-anchor=\"middle\">" << html_escape(xlabel) << "</text>\n";
    s << "<text x=\"14\" y=\"" << (T + H - B) / 2 << "\" font-size=\"12\" text-anchor=\"middle\" "
      << "transform=\"rotate(-90 14 " << (T + H - B) / 2 << ")\">best time (ms)</text>\n";
    for (size_t i = 0; i < series.size(); i++) {
        const char *color = kColors[i % (sizeof kColors / sizeof kColors[0])];
        s << "<polyline class=\"strategy\" data-strategy=\"" << html_escape(series[i].strategy)
          << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
        bool first = true;
        for (auto [x, y] : series[i].points) {
            s << (first ? "" : " ") << num(sx(x)) << "," << num(sy(y));
            first = false;
        }
        s << "\"/>\n";
        double ly = T + 14 + 18 * double(i);
        s << "<line x1=\"" << W - R + 10 << "\" y1=\"" << ly - 4 << "\" x2=\"" << W - R + 30
          << "\" y2=\"" << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
        s << "<text x=\"" << W - R + 34 << "\" y=\"" << ly << "\" font-size=\"11\">"
          << html_escape(series[i].strategy) << "</text>\n";
    }
    s << "</svg>\n";
    return s.str();
}

/// The cost models saved beside the database (the latest per target) and how well each ranked
/// workloads held out of its training, as HTML; one line per model also goes to `out`.
std::string cost_model_section(const Database &db, std::ostream &out) {
    std::vector<CostModelRecord> models = db.cost_models();
    std::ostringstream h;
    h << "<h2>Cost models</h2>\n";
    if (models.empty()) {
        h << "<p>none saved yet: <code>kiln tune</code> saves one beside the database after a run "
             "that measured something</p>\n";
        return h.str();
    }
    for (const CostModelRecord &m : models) {
        const nlohmann::json &held =
            m.evaluation.contains("held_out") ? m.evaluation["held_out"] : nlohmann::json::array();
        double tau = m.evaluation.value("mean_kendall_tau", 0.0);
        char line[160];
        std::snprintf(line, sizeof line, "held-out Kendall's tau %.2f over %zu workloads", tau,
                      held.size());
        std::string quality = held.empty() ? "no held-out workload yet (it needs 2 workloads with "
                                             "5 measured configs each)"
                                           : line;
        out << "cost model for target " << m.target_id << ": trained on " << m.rows
            << " configs of " << m.workloads << " workloads; " << quality << " (" << m.file
            << ")\n";
        h << "<p>target " << html_escape(db.target(m.target_id).key.to_string()) << ": trained "
          << fmt_time(m.trained_us) << " on " << m.rows << " configs of " << m.workloads
          << " workloads, saved as <code>" << html_escape(m.file) << "</code>; "
          << html_escape(quality) << "</p>\n";
        if (held.empty()) continue;
        h << "<table><tr><th>held-out workload</th><th>configs</th><th>Kendall's tau</th>"
             "<th>k fastest among the k best predicted</th></tr>\n";
        for (const nlohmann::json &w : held) {
            WorkloadRecord r = db.workload(w.value("workload_id", int64_t(0)));
            char tau_text[32];
            std::snprintf(tau_text, sizeof tau_text, "%.2f", w.value("kendall_tau", 0.0));
            h << "<tr><td>" << html_escape(r.key.op + " " + r.key.shape) << "</td><td>"
              << w.value("rows", 0) << "</td><td>" << tau_text << "</td><td>"
              << w.value("top_k_hits", 0) << " of " << w.value("top_k", 0) << "</td></tr>\n";
        }
        h << "</table>\n";
    }
    return h.str();
}

void cmd_report(const Options &o, std::ostream &out) {
    Database db = Database::open_existing(o.db);
    Options named = o;
    named.workload = o.op;
    named.shape.clear();
    std::vector<WorkloadRecord> workloads =
        o.op.empty() ? db.workloads() : resolve_workloads(db, named);
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<title>kiln tuning "
         "report</title>\n"
      << "<style>body{font-family:sans-serif;margin:2em;color:#222}"
         "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
         "text-align:left;font-size:13px}th{background:#f3f3f3}code{font-size:12px}"
         ".plots{display:flex;flex-wrap:wrap;gap:1em}</style>\n</head><body>\n";
    h << "<h1>kiln tuning report</h1>\n<p>database <code>" << html_escape(db.path())
      << "</code>, generated "
      << fmt_time(std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count())
      << "</p>\n";

    // Table of the best config per workload and target.
    h << "<h2>Best configs</h2>\n<table><tr><th>workload</th><th>shape</th><th>types</th>"
         "<th>target</th><th>best</th><th>spread</th><th>measured</th><th>config</th></tr>\n";
    for (const WorkloadRecord &w : workloads) {
        for (const TargetRecord &t : targets_of(db, w.id, 0)) {
            std::optional<BestConfig> b = db.best(w.id, t.id);
            Statistics s = db.statistics({w.id, t.id, std::nullopt});
            h << "<tr><td>" << html_escape(w.key.op) << "</td><td>" << html_escape(w.key.shape)
              << "</td><td>" << html_escape(w.key.types) << "</td><td>"
              << html_escape(t.key.to_string()) << "</td><td>" << (b ? fmt_ms(b->median_ms) : "-")
              << "</td><td>" << (b ? html_escape(measured_text(*b)) : "-") << "</td><td>"
              << s.measurements << " (" << (s.per_status.count("ok") ? s.per_status["ok"] : 0)
              << " ok)</td><td><code>"
              << (b ? html_escape(b->config.hash + " " + b->config.config_json) : "")
              << "</code></td></tr>\n";
        }
    }
    h << "</table>\n";

    // Progress plots: per workload and target, one line per strategy (its longest run).
    for (const WorkloadRecord &w : workloads) {
        for (const TargetRecord &t : targets_of(db, w.id, 0)) {
            std::map<std::string, std::pair<size_t, std::vector<ProgressPoint>>> longest;
            for (const RunRecord &r : db.runs(w.id, t.id)) {
                std::vector<ProgressPoint> p = db.progress(r.id);
                auto &slot = longest[r.strategy];
                if (p.size() >= slot.first) slot = {p.size(), std::move(p)};
            }
            std::vector<Series> by_trial, by_time;
            for (auto &[strategy, slot] : longest) {
                Series a{strategy, {}}, b{strategy, {}};
                for (const ProgressPoint &p : slot.second) {
                    if (!p.best_ms) continue;
                    a.points.push_back({double(p.trial), *p.best_ms});
                    b.points.push_back({p.elapsed_s, *p.best_ms});
                }
                by_trial.push_back(std::move(a));
                by_time.push_back(std::move(b));
            }
            h << "<h2>" << html_escape(w.key.op + " " + w.key.shape + " " + w.key.types)
              << "</h2>\n<p>target " << html_escape(t.key.to_string()) << "</p>\n";
            if (longest.empty()) {
                h << "<p>no tuning runs recorded (measurements made outside runs only)</p>\n";
                continue;
            }
            h << "<div class=\"plots\">\n"
              << svg_plot(by_trial, "best time against trials", "trials")
              << svg_plot(by_time, "best time against wall time", "seconds since the run started")
              << "</div>\n";
        }
    }
    if (workloads.empty()) h << "<p>no workloads yet; run <code>kiln tune OP</code></p>\n";
    h << cost_model_section(db, out);
    h << "</body></html>\n";

    std::ofstream f(o.output);
    if (!f) runtime_error("cannot write report '", o.output, "'; check the directory exists");
    f << h.str();
    f.close();
    if (!f) runtime_error("cannot write report '", o.output, "' (disk full?)");
    out << "wrote " << o.output << " (" << workloads.size() << " workloads)\n";
}

} // namespace

void add_db_commands(CLI::App &app, std::ostream &out, std::ostream &err) {
    auto o = std::make_shared<Options>();
    CLI::App *db =
        app.add_subcommand("db", "inspect, export, import and report the tuning database");
    db->require_subcommand(1);
    auto add_db = [&](CLI::App *sub) {
        sub->add_option("--db", o->db, "tuning database file")->capture_default_str();
    };
    add_db(db);
    std::ostream *po = &out, *pe = &err;
    auto wrap = [o, po, pe](void (*fn)(const Options &, std::ostream &)) {
        return [o, fn, po, pe] {
            try {
                fn(*o, *po);
            } catch (const std::exception &e) {
                *pe << "kiln: " << e.what() << "\n";
                throw CLI::RuntimeError(1);
            }
        };
    };

    CLI::App *list = db->add_subcommand("list", "list targets and workloads with their best times");
    add_db(list);
    list->callback(wrap(cmd_list));

    CLI::App *best = db->add_subcommand("best", "the fastest configs of a workload");
    add_db(best);
    best->add_option("workload", o->workload, "operator name or workload id")->required();
    best->add_option("--shape", o->shape, "only the workload with this shape");
    best->add_option("--target", o->target, "only this target id");
    best->add_option("--top", o->top, "how many configs")->capture_default_str();
    best->add_flag("--trace", o->trace, "print each config's schedule trace JSON");
    best->callback(wrap(cmd_best));

    CLI::App *show = db->add_subcommand("show", "runs, statistics and history of a workload");
    add_db(show);
    show->add_option("workload", o->workload, "operator name or workload id")->required();
    show->add_option("--shape", o->shape, "only the workload with this shape");
    show->add_option("--target", o->target, "only this target id");
    show->add_option("--history", o->history, "how many recent measurements")
        ->capture_default_str();
    show->callback(wrap(cmd_show));

    CLI::App *exp = db->add_subcommand("export", "write the database (or one operator) as JSON");
    add_db(exp);
    exp->add_option("file", o->file, "output JSON file, - for stdout")->required();
    exp->add_option("--op", o->op, "only this operator");
    exp->callback(wrap(cmd_export));

    CLI::App *imp = db->add_subcommand("import", "add an exported JSON file (idempotent)");
    add_db(imp);
    imp->add_option("file", o->file, "JSON file from `kiln db export`")->required();
    imp->callback(wrap(cmd_import));

    CLI::App *report = db->add_subcommand("report", "write an HTML report with progress plots");
    add_db(report);
    report->add_option("-o,--output", o->output, "HTML file")->capture_default_str();
    report->add_option("--op", o->op, "only this operator");
    report->callback(wrap(cmd_report));
}

int run_db_command_line(const std::vector<std::string> &args, std::ostream &out,
                        std::ostream &err) {
    CLI::App app{"kiln"};
    app.require_subcommand(1);
    add_db_commands(app, out, err);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
        app.parse(reversed);
    } catch (const CLI::ParseError &e) {
        return app.exit(e, out, err);
    }
    return 0;
}

} // namespace kiln
