#include "autotune/Checker.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "lang/Error.h"
#include "lang/ReferenceEvaluator.h"
#include "runtime/kiln_runtime.h"

namespace kiln::autotune {

namespace {

struct SplitMix {
    uint64_t state;
    explicit SplitMix(uint64_t seed)
        : state(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double unit() { return double(next() >> 11) * 0x1.0p-53; } ///< [0, 1)
};

int element_bytes(Type t) {
    return t.bits == 1 ? 1 : t.bits / 8;
}

double read_element(const uint8_t *p, Type t) {
    switch (t.code) {
    case Type::BFloat:
        return float_of_bfloat16_bits(*reinterpret_cast<const uint16_t *>(p));
    case Type::Float:
        if (t.bits == 32) {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        } else {
            double d;
            std::memcpy(&d, p, 8);
            return d;
        }
    case Type::Int:
        switch (t.bits) {
        case 8:
            return *reinterpret_cast<const int8_t *>(p);
        case 16:
            return *reinterpret_cast<const int16_t *>(p);
        case 32:
            return *reinterpret_cast<const int32_t *>(p);
        default:
            return double(*reinterpret_cast<const int64_t *>(p));
        }
    default:
        switch (t.bits) {
        case 1:
        case 8:
            return *p;
        case 16:
            return *reinterpret_cast<const uint16_t *>(p);
        case 32:
            return *reinterpret_cast<const uint32_t *>(p);
        default:
            return double(*reinterpret_cast<const uint64_t *>(p));
        }
    }
}

/// The fill value's bytes: a quiet NaN with a payload no arithmetic produces, or 0xA5 repeated.
std::vector<uint8_t> sentinel(Type t) {
    std::vector<uint8_t> bytes(size_t(element_bytes(t)), 0xA5);
    if (t.is_float() && t.bits == 32) {
        uint32_t v = 0x7fc0dea5u;
        std::memcpy(bytes.data(), &v, 4);
    } else if (t.is_float() && t.bits == 64) {
        uint64_t v = 0x7ff8dea5dea5dea5ull;
        std::memcpy(bytes.data(), &v, 8);
    } else if (t.is_bfloat()) {
        uint16_t v = 0x7fa5u;
        std::memcpy(bytes.data(), &v, 2);
    }
    return bytes;
}

/// Calls fn(coordinates, element address) for every element of b.
void for_each_element(const BufferBase &b,
                      const std::function<void(const std::vector<int> &, uint8_t *)> &fn) {
    int dims = b.dimensions();
    int64_t n = b.number_of_elements();
    if (n == 0) return;
    std::vector<int> pos(size_t(dims), 0);
    for (int d = 0; d < dims; d++)
        pos[d] = b.dim(d).min;
    for (int64_t i = 0; i < n; i++) {
        fn(pos, b.address_of(pos));
        for (int d = 0; d < dims; d++) {
            if (++pos[d] < b.dim(d).min + b.dim(d).extent) break;
            pos[d] = b.dim(d).min;
        }
    }
}

std::string point_text(const std::vector<int> &p) {
    std::string s = "(";
    for (size_t i = 0; i < p.size(); i++)
        s += (i ? ", " : "") + std::to_string(p[i]);
    return s + ")";
}

std::string number(double v) {
    std::ostringstream s;
    s.precision(9);
    s << v;
    return s.str();
}

double relative_error(double got, double expected) {
    if (std::isnan(got) || std::isnan(expected))
        return std::isnan(got) == std::isnan(expected) ? 0 : INFINITY;
    if (got == expected) return 0;
    double e = std::abs(got - expected) / std::max(1.0, std::abs(expected));
    return std::isnan(e) ? INFINITY : e;
}

} // namespace

void fill_random(BufferBase &b, uint64_t seed) {
    SplitMix rng(seed);
    Type t = b.type();
    for_each_element(b, [&](const std::vector<int> &, uint8_t *p) {
        double u = rng.unit();
        if (t.is_float()) {
            double v = -1 + 2 * u;
            if (t.is_bfloat()) {
                uint16_t bits = bfloat16_bits_of(float(v));
                std::memcpy(p, &bits, 2);
            } else if (t.bits == 32) {
                float f = float(v);
                std::memcpy(p, &f, 4);
            } else {
                std::memcpy(p, &v, 8);
            }
            return;
        }
        int64_t v;
        if (t.bits == 1) {
            v = u < 0.5;
        } else if (t.bits <= 16) {
            v = int64_t(rng.next() & ((uint64_t(1) << t.bits) - 1));
        } else {
            v = int64_t(std::floor(u * 2001)) - (t.is_uint() ? 0 : 1000);
        }
        std::memcpy(p, &v, size_t(element_bytes(t))); // little-endian: the low bytes
    });
}

std::vector<std::vector<int>> sample_points(const std::vector<int> &extents, int random_points,
                                            uint64_t seed) {
    std::set<std::vector<int>> seen;
    std::vector<std::vector<int>> points;
    auto add = [&](const std::vector<int> &p) {
        if (seen.insert(p).second) points.push_back(p);
    };
    int dims = int(extents.size());
    // Edges: one dimension varies, every other one is at its first or last coordinate (the
    // corners are the ends of the edges).
    for (int along = 0; along < std::max(dims, 1); along++) {
        for (int corner = 0; corner < (1 << std::max(dims - 1, 0)); corner++) {
            std::vector<int> p(size_t(dims), 0);
            int bit = 0;
            for (int d = 0; d < dims; d++) {
                if (d == along) continue;
                p[d] = (corner >> bit++) & 1 ? extents[d] - 1 : 0;
            }
            if (dims == 0) {
                add(p);
                continue;
            }
            int n = extents[along];
            std::vector<int> at = {0, 1, 2, n - 3, n - 2, n - 1};
            for (int k = 1; k <= 26; k++)
                at.push_back(int(int64_t(n - 1) * k / 27));
            for (int x : at) {
                if (x < 0 || x >= n) continue;
                p[along] = x;
                add(p);
            }
        }
    }
    // Distinct random points, as many as asked for or as the output has.
    int64_t elements = 1;
    for (int e : extents)
        elements *= e;
    SplitMix rng(seed);
    for (int added = 0; added < random_points && int64_t(points.size()) < elements;) {
        std::vector<int> p(static_cast<size_t>(dims), 0);
        for (int d = 0; d < dims; d++)
            p[d] = int(rng.next() % uint64_t(extents[d]));
        if (seen.insert(p).second) {
            points.push_back(p);
            added++;
        }
    }
    return points;
}

ReferenceChecker::ReferenceChecker(apps::OperatorInstance ref, double tol, int random_points)
    : reference(std::move(ref)), tolerance(tol) {
    sets[0].data = reference.input_data;
    for (const BufferBase &b : reference.input_data) {
        std::vector<int> extents, mins;
        for (int d = 0; d < b.dimensions(); d++) {
            extents.push_back(b.dim(d).extent);
            mins.push_back(b.dim(d).min);
        }
        BufferBase other(b.type(), extents, b.name());
        other.set_min(mins);
        fill_random(other, 0x5EED2);
        sets[1].data.push_back(other);
    }
    sets[0].points = sample_points(reference.output_extents, random_points, 1);
    sets[1].points = sample_points(reference.output_extents, random_points, 2);
}

std::vector<double> ReferenceChecker::expected_at(const InputSet &set,
                                                  const std::vector<std::vector<int>> &points) {
    for (size_t i = 0; i < reference.inputs.size(); i++) {
        ImageParam p = reference.inputs[i];
        p.set(set.data[i]);
    }
    BufferBase v = reference_realize_points(reference.output, points);
    std::vector<double> r;
    for (size_t i = 0; i < points.size(); i++)
        r.push_back(read_element(v.raw_data() + i * size_t(element_bytes(v.type())), v.type()));
    return r;
}

CheckResult ReferenceChecker::check(const apps::OperatorInstance &candidate,
                                    const std::function<std::string(BufferBase &)> &run) {
    CheckResult r;
    auto fail = [&](const char *status, const std::string &msg) {
        r.status = status;
        r.error = msg;
        return r;
    };
    auto bind = [&](const InputSet &set) {
        for (size_t i = 0; i < candidate.inputs.size(); i++) {
            ImageParam p = candidate.inputs[i];
            p.set(set.data[i]);
        }
    };
    const std::vector<uint8_t> fill = sentinel(candidate.output.output_type());
    // Outputs from make_output are dense from 0: element i is at byte i * size.
    const size_t size = fill.size();
    const std::vector<int> &extents = candidate.output_extents;
    auto filled_output = [&]() {
        BufferBase out = candidate.make_output();
        uint8_t *data = out.raw_data();
        for (int64_t i = 0; i < out.number_of_elements(); i++)
            std::memcpy(data + i * size, fill.data(), size);
        out.set_host_dirty(true);
        return out;
    };
    auto coordinates = [&](int64_t i) {
        std::vector<int> p;
        for (int e : extents) {
            p.push_back(int(i % e));
            i /= e;
        }
        return p;
    };
    std::string name = candidate.output.name();
    BufferBase first;
    for (int s = 0; s < 2; s++) {
        InputSet &set = sets[s];
        if (set.expected.empty()) set.expected = expected_at(set, set.points);
        std::string with = s == 0 ? "" : " with the second input set";
        bind(set);
        BufferBase out = filled_output();
        std::string err = run(out);
        if (!err.empty()) return fail("runtime_error", err + with);
        // Unwritten points: elements still holding the fill value that the reference does not
        // also give.
        int unwritten_checked = 0;
        std::string unwritten;
        const uint8_t *data = out.raw_data();
        for (int64_t i = 0;
             i < out.number_of_elements() && unwritten.empty() && unwritten_checked < 16; i++) {
            if (std::memcmp(data + i * size, fill.data(), size) != 0) continue;
            unwritten_checked++;
            std::vector<int> p = coordinates(i);
            double expected = expected_at(set, {p})[0];
            double got = read_element(data + i * size, out.type());
            if (relative_error(got, expected) <= tolerance) continue;
            unwritten = "output '" + name + "' at " + point_text(p) +
                        " was never written (it still holds the " +
                        (out.type().is_float() ? "NaN" : "sentinel") +
                        " it was filled with; expected " + number(expected) + ")" + with;
        }
        if (!unwritten.empty()) return fail("wrong_answer", unwritten);
        for (size_t i = 0; i < set.points.size(); i++) {
            double got = read_element(out.address_of(set.points[i]), out.type());
            double e = relative_error(got, set.expected[i]);
            r.max_error = std::max(r.max_error, e);
            if (!(e <= tolerance)) {
                return fail("wrong_answer",
                            "output '" + name + "' at " + point_text(set.points[i]) + ": got " +
                                number(got) + ", the reference evaluator gives " +
                                number(set.expected[i]) + " (relative error " + number(e) +
                                " > tolerance " + number(tolerance) + ")" + with);
            }
        }
        if (s == 0) first = out;
        if (s != 0) continue;
        // 1 thread against N threads on the same inputs (N = 4 when the candidate runs with 1).
        int threads = kiln_get_num_threads();
        int other = threads > 1 ? 1 : 4;
        kiln_set_num_threads(other);
        BufferBase again = filled_output();
        err = run(again);
        kiln_set_num_threads(threads);
        if (!err.empty())
            return fail("runtime_error", err + " (with " + std::to_string(other) + " threads)");
        double e = 0;
        for (int64_t i = 0; i < again.number_of_elements(); i++)
            e = std::max(e,
                         relative_error(read_element(again.raw_data() + i * size, again.type()),
                                        read_element(first.raw_data() + i * size, first.type())));
        if (!(e <= tolerance)) {
            return fail("wrong_answer",
                        "output '" + name + "' differs between " + std::to_string(threads) +
                            " and " + std::to_string(other) + " threads (max relative error " +
                            number(e) + " > tolerance " + number(tolerance) +
                            "): parallel iterations interfere");
        }
    }
    bind(sets[0]);
    return r;
}

} // namespace kiln::autotune
