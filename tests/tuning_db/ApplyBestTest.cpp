#include "tuning_db/ApplyBest.h"

#include <gtest/gtest.h>

#include <sstream>

#include "lang/Func.h"
#include "lang/IROperator.h"
#include "lang/Param.h"
#include "tests/tuning_db/TestDb.h"

namespace kiln::tuning_db {
namespace {

using test::ok_measurement;
using test::ScratchDir;
using test::test_target;

// Every Func and Var is named, so two builds of the pipeline hash the same.
struct Blur {
    ImageParam in{Float(32), 2, "in"};
    Func blur_x{"blur_x"}, blur_y{"blur_y"};
    std::vector<Func> outputs() const { return {blur_y}; }
};

Blur make_blur() {
    Blur b;
    Var x("x"), y("y");
    b.blur_x(x, y) = b.in(x - 1, y) + b.in(x, y) + b.in(x + 1, y);
    b.blur_y(x, y) = b.blur_x(x, y - 1) + b.blur_x(x, y) + b.blur_x(x, y + 1);
    return b;
}

std::string hex(uint64_t h) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%016llx", (unsigned long long)h);
    return buf;
}

TEST(ApplyBest, AppliesTheFastestStoredScheduleToAFreshPipeline) {
    ScratchDir dir;
    Database db = Database::open(dir.file("kiln.db"));
    Blur tuned = make_blur();
    Var x("x"), y("y"), yo("yo"), yi("yi");
    WorkloadKey key{"blur", hex(algorithm_hash(tuned.outputs())), "640x480", "float32"};
    int64_t w = db.workload_id(key), t = db.target_id(test_target());

    // The slower config: no directives. The faster one: a real schedule.
    int64_t slow =
        db.config_id("plain", "{}", ScheduleTrace::capture(tuned.outputs()).to_json_string());
    tuned.blur_y.split(y, yo, yi, 8).parallel(yo).vectorize(x, 8);
    tuned.blur_x.compute_at(tuned.blur_y, yo);
    ScheduleTrace fast_trace = ScheduleTrace::capture(tuned.outputs());
    int64_t fast = db.config_id("split8", "{\"split\":8}", fast_trace.to_json_string());
    db.record_measurement(ok_measurement(0, w, t, slow, 3.0));
    db.record_measurement(ok_measurement(0, w, t, fast, 1.0));

    std::optional<ScheduleTrace> best = best_trace(db, key, test_target());
    ASSERT_TRUE(best);
    EXPECT_EQ(*best, fast_trace);

    Blur fresh = make_blur();
    std::ostringstream warn;
    EXPECT_TRUE(apply_best_or_default(db, key, test_target(), fresh.outputs(), warn));
    EXPECT_EQ(warn.str(), "");
    EXPECT_EQ(ScheduleTrace::capture(fresh.outputs()), fast_trace);
}

TEST(ApplyBest, FallsBackToTheDefaultScheduleWithAWarning) {
    ScratchDir dir;
    std::string path = dir.file("kiln.db");
    Database db = Database::open(path);
    Blur b = make_blur();
    WorkloadKey key{"blur", hex(algorithm_hash(b.outputs())), "640x480", "float32"};

    std::ostringstream warn;
    EXPECT_FALSE(apply_best_or_default(db, key, test_target(), b.outputs(), warn));
    EXPECT_EQ(warn.str(),
              "kiln: warning: no tuned schedule for blur 640x480 float32 (" + key.algorithm_hash +
                  ") on testcpu threads=4 kiln 0.1.0 / LLVM 19 in tuning database '" + path +
                  "'; using the default schedule (run `kiln tune blur` on "
                  "this machine)\n");
    EXPECT_TRUE(ScheduleTrace::capture(b.outputs()).directives.empty());

    // Results for another thread count are pointed out.
    int64_t w = db.workload_id(key), t1 = db.target_id(test_target(1));
    int64_t c = db.config_id("plain", "{}", ScheduleTrace::capture(b.outputs()).to_json_string());
    db.record_measurement(ok_measurement(0, w, t1, c, 2.0));
    std::ostringstream warn2;
    EXPECT_FALSE(apply_best_or_default(db, key, test_target(4), b.outputs(), warn2));
    EXPECT_NE(warn2.str().find("; using the default schedule (results exist for other targets: "
                               "testcpu threads=1 kiln 0.1.0 / LLVM 19)"),
              std::string::npos)
        << warn2.str();
}

} // namespace
} // namespace kiln::tuning_db
