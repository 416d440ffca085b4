// A small interpreter for flattened statements, for checking that a lowering pass keeps the
// meaning of its input: it runs a Stmt over named buffers of Values, lane by lane, with every loop
// run serially in order. Expressions go through lang/ExprEvaluator. Loads and stores outside a
// buffer, failed assertions and unsupported nodes throw, so that a pass that makes a program read
// out of bounds (an unpredicated tail, say) fails its test.
#pragma once

#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lang/Error.h"
#include "lang/ExprEvaluator.h"
#include "lang/IR.h"
#include "lang/IREquality.h"
#include "lang/IRPrinter.h"

namespace kiln::test {

/// A flat buffer of one element type.
struct InterpBuffer {
    Type type;
    std::vector<Value> data;
};

using Buffers = std::map<std::string, InterpBuffer>;

/// Raised when the interpreted program does something the IR forbids.
struct InterpreterError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class StmtInterpreter {
public:
    Buffers buffers;
    /// Values of the free scalar variables (buffer strides, extents, params).
    std::map<std::string, Value> scalars;
    /// How many Loads and Stores ran, lane by lane, for tests that check the work done.
    int64_t loads = 0, stores = 0;

    void run(const Stmt &s) {
        evaluator.on_load = [this](const Load *op, int64_t index) {
            loads++;
            const InterpBuffer &b = buffer(op->name);
            check_index(op->name, b, index, "load");
            return b.data[size_t(index)];
        };
        for (const auto &[name, v] : scalars)
            set(name, {v});
        exec(s);
    }

private:
    ExprEvaluator evaluator;
    /// Variables bound to vectors: the evaluator binds one lane of them at a time.
    std::map<std::string, std::vector<Value>> vectors;

    InterpBuffer &buffer(const std::string &name) {
        auto it = buffers.find(name);
        if (it == buffers.end()) throw InterpreterError("access to unknown buffer '" + name + "'");
        return it->second;
    }

    static void check_index(const std::string &name, const InterpBuffer &b, int64_t index,
                            const char *what) {
        if (index < 0 || index >= int64_t(b.data.size())) {
            throw InterpreterError(std::string(what) + " of '" + name + "' at " +
                                   std::to_string(index) + " outside [0, " +
                                   std::to_string(b.data.size()) + ")");
        }
    }

    std::vector<Value> eval(const Expr &e) {
        std::vector<Value> out;
        for (int lane = 0; lane < e.type().lanes; lane++) {
            for (const auto &[name, values] : vectors)
                evaluator.bind(name, values[size_t(lane)]);
            out.push_back(evaluator.eval(e, lane));
        }
        return out;
    }

    Value eval_scalar(const Expr &e) {
        if (!e.type().is_scalar()) throw InterpreterError("expected a scalar: " + to_string(e));
        return eval(e)[0];
    }

    /// Every bound variable, one Value per lane.
    std::map<std::string, std::vector<Value>> env;

    void set(const std::string &name, const std::vector<Value> &values) {
        env[name] = values;
        if (values.size() == 1) {
            vectors.erase(name);
            evaluator.bind(name, values[0]);
        } else {
            evaluator.unbind(name);
            vectors[name] = values;
        }
    }

    /// Binds a name for the duration of f, restoring what it shadowed.
    template <typename F>
    void with_binding(const std::string &name, const std::vector<Value> &values, F f) {
        std::optional<std::vector<Value>> shadowed;
        if (auto it = env.find(name); it != env.end()) shadowed = it->second;
        set(name, values);
        f();
        if (shadowed) {
            set(name, *shadowed);
        } else {
            env.erase(name);
            vectors.erase(name);
            evaluator.unbind(name);
        }
    }

    void exec(const Stmt &s) {
        switch (s->node_type) {
        case IRNodeType::LetStmt: {
            const auto *op = s.as<LetStmt>();
            with_binding(op->name, eval(op->value), [&] { exec(op->body); });
            return;
        }
        case IRNodeType::AssertStmt: {
            const auto *op = s.as<AssertStmt>();
            if (!eval_scalar(op->condition).as_bool()) {
                throw InterpreterError("assertion failed: " + op->message);
            }
            return;
        }
        case IRNodeType::For: {
            const auto *op = s.as<For>();
            int64_t min = eval_scalar(op->min).as_int(), extent = eval_scalar(op->extent).as_int();
            for (int64_t i = min; i < min + extent; i++) {
                with_binding(op->name, {Value::make_int(Int(32), i)}, [&] { exec(op->body); });
            }
            return;
        }
        case IRNodeType::Store: {
            const auto *op = s.as<Store>();
            std::vector<Value> value = eval(op->value), index = eval(op->index);
            std::vector<Value> pred;
            if (op->predicate.defined()) pred = eval(op->predicate);
            InterpBuffer &b = buffer(op->name);
            for (size_t lane = 0; lane < value.size(); lane++) {
                if (!pred.empty() && !pred[lane].as_bool()) continue;
                check_index(op->name, b, index[lane].as_int(), "store");
                if (value[lane].type != b.type.element_of()) {
                    throw InterpreterError("store of " + value[lane].type.to_string() + " to '" +
                                           op->name + "' of " + b.type.to_string());
                }
                b.data[size_t(index[lane].as_int())] = value[lane];
                stores++;
            }
            return;
        }
        case IRNodeType::Allocate: {
            const auto *op = s.as<Allocate>();
            int64_t size = 1;
            for (const Expr &e : op->extents)
                size *= eval_scalar(e).as_int();
            if (size < 0) throw InterpreterError("negative allocation size for " + op->name);
            std::optional<InterpBuffer> shadowed;
            if (auto it = buffers.find(op->name); it != buffers.end()) shadowed = it->second;
            // Fresh memory holds a recognizable garbage value rather than zero, so that a pass
            // that reads before writing is more likely to be caught.
            buffers[op->name] = InterpBuffer{
                op->type, std::vector<Value>(size_t(size), Value::make_int(op->type, 77))};
            exec(op->body);
            buffers.erase(op->name);
            if (shadowed) buffers[op->name] = *shadowed;
            return;
        }
        case IRNodeType::Free:
            return;
        case IRNodeType::Block: {
            const auto *op = s.as<Block>();
            exec(op->first);
            exec(op->rest);
            return;
        }
        case IRNodeType::IfThenElse: {
            const auto *op = s.as<IfThenElse>();
            if (eval_scalar(op->condition).as_bool()) {
                exec(op->then_case);
            } else if (op->else_case.defined()) {
                exec(op->else_case);
            }
            return;
        }
        case IRNodeType::Evaluate:
            eval(s.as<Evaluate>()->value);
            return;
        case IRNodeType::ProducerConsumer:
            exec(s.as<ProducerConsumer>()->body);
            return;
        default:
            throw InterpreterError(std::string("cannot interpret ") + node_type_name(s->node_type));
        }
    }
};

/// A buffer of n random integers in [lo, hi] of type t (an integer or float type).
inline InterpBuffer random_buffer(Type t, int n, std::mt19937 &rng, int lo = -100, int hi = 100) {
    std::uniform_int_distribution<int> d(lo, hi);
    InterpBuffer b{t, {}};
    for (int i = 0; i < n; i++)
        b.data.push_back(Value::make_int(t, d(rng)));
    return b;
}

/// A buffer of n zeros of type t.
inline InterpBuffer zero_buffer(Type t, int n) {
    return InterpBuffer{t, std::vector<Value>(size_t(n), Value::make_int(t, 0))};
}

/// The first difference between two sets of buffers, or an empty string when they are equal.
inline std::string first_difference(const Buffers &a, const Buffers &b) {
    for (const auto &[name, ba] : a) {
        auto it = b.find(name);
        if (it == b.end()) return "buffer '" + name + "' is missing";
        const InterpBuffer &bb = it->second;
        if (ba.data.size() != bb.data.size()) return "buffer '" + name + "' changed size";
        for (size_t i = 0; i < ba.data.size(); i++) {
            if (ba.data[i] != bb.data[i]) {
                return name + "[" + std::to_string(i) + "]: " + ba.data[i].to_string() + " vs " +
                       bb.data[i].to_string();
            }
        }
    }
    return "";
}

/// Runs both statements from the same buffers and scalar values; succeeds when both finish and
/// leave every buffer equal, and prints both statements otherwise.
inline ::testing::AssertionResult same_effect(const Stmt &before, const Stmt &after,
                                              const Buffers &initial,
                                              const std::map<std::string, Value> &scalars = {}) {
    StmtInterpreter a, b;
    a.buffers = b.buffers = initial;
    a.scalars = b.scalars = scalars;
    std::string failure;
    try {
        a.run(before);
    } catch (const std::exception &e) {
        failure = std::string("before failed: ") + e.what();
    }
    if (failure.empty()) {
        try {
            b.run(after);
        } catch (const std::exception &e) {
            failure = std::string("after failed: ") + e.what();
        }
    }
    if (failure.empty()) failure = first_difference(a.buffers, b.buffers);
    if (failure.empty()) return ::testing::AssertionSuccess();
    std::string values;
    for (const auto &[name, v] : scalars)
        values += " " + name + "=" + v.to_string();
    return ::testing::AssertionFailure() << failure << "\nscalars:" << values << "\nbefore:\n"
                                         << before << "after:\n"
                                         << after;
}

/// Structural equality that prints both statements on failure.
inline ::testing::AssertionResult same_stmt(const Stmt &got, const Stmt &expected) {
    if (equal(got, expected)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "\nexpected:\n" << expected << "got:\n" << got;
}

inline Expr int_var(const std::string &name) {
    return Variable::make(Int(32), name);
}

inline Value int_value(int64_t v) {
    return Value::make_int(Int(32), v);
}

} // namespace kiln::test
