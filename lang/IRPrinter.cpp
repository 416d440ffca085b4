#include "lang/IRPrinter.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "lang/Function.h"
#include "lang/IRVisitor.h"

namespace kiln {

namespace {

class IRPrinter : public IRVisitor {
public:
    explicit IRPrinter(std::ostream &s) : out(s) {}
    void print(const Expr &e) {
        if (e.defined()) {
            include(e);
        } else {
            out << "(undefined)";
        }
    }
    void print(const Stmt &s) {
        if (s.defined()) {
            include(s);
        } else {
            do_indent();
            out << "(undefined)\n";
        }
    }

private:
    std::ostream &out;
    int indent = 0;

    void do_indent() { out << std::string(size_t(indent) * 2, ' '); }
    void print_list(const std::vector<Expr> &v) {
        for (size_t i = 0; i < v.size(); i++) {
            if (i) out << ", ";
            print(v[i]);
        }
    }
    void binary(const Expr &a, const char *op, const Expr &b) {
        out << "(";
        print(a);
        out << " " << op << " ";
        print(b);
        out << ")";
    }
    void call(const char *name, const Expr &a, const Expr &b) {
        out << name << "(";
        print(a);
        out << ", ";
        print(b);
        out << ")";
    }
    void body(const Stmt &s) {
        indent++;
        print(s);
        indent--;
    }

    void visit(const IntImm *op) override {
        if (op->type == Int(32)) {
            out << op->value;
        } else {
            out << "(" << op->type << ")" << op->value;
        }
    }
    void visit(const UIntImm *op) override {
        if (op->type.is_bool()) {
            out << (op->value ? "true" : "false");
        } else {
            out << "(" << op->type << ")" << op->value;
        }
    }
    void visit(const FloatImm *op) override {
        // The shortest text that reads back as the same value in the constant's own precision,
        // so 0.1f prints as 0.1f rather than as the double nearest to it.
        char buf[64];
        bool is_f32 = op->type.bits <= 32;
        if (op->type.is_bfloat()) out << op->type << "(";
        auto res = is_f32 ? std::to_chars(buf, buf + sizeof(buf), float(op->value))
                          : std::to_chars(buf, buf + sizeof(buf), op->value);
        std::string str(buf, res.ptr);
        if (std::isfinite(op->value) && str.find_first_of(".e") == std::string::npos) str += ".0";
        out << str << (is_f32 ? "f" : "") << (op->type.is_bfloat() ? ")" : "");
    }
    void visit(const Cast *op) override {
        out << op->type << "(";
        print(op->value);
        out << ")";
    }
    void visit(const Variable *op) override { out << op->name; }
    void visit(const Add *op) override { binary(op->a, "+", op->b); }
    void visit(const Sub *op) override { binary(op->a, "-", op->b); }
    void visit(const Mul *op) override { binary(op->a, "*", op->b); }
    void visit(const Div *op) override { binary(op->a, "/", op->b); }
    void visit(const Mod *op) override { binary(op->a, "%", op->b); }
    void visit(const Min *op) override { call("min", op->a, op->b); }
    void visit(const Max *op) override { call("max", op->a, op->b); }
    void visit(const EQ *op) override { binary(op->a, "==", op->b); }
    void visit(const NE *op) override { binary(op->a, "!=", op->b); }
    void visit(const LT *op) override { binary(op->a, "<", op->b); }
    void visit(const LE *op) override { binary(op->a, "<=", op->b); }
    void visit(const GT *op) override { binary(op->a, ">", op->b); }
    void visit(const GE *op) override { binary(op->a, ">=", op->b); }
    void visit(const And *op) override { binary(op->a, "&&", op->b); }
    void visit(const Or *op) override { binary(op->a, "||", op->b); }
    void visit(const Not *op) override {
        out << "!";
        print(op->a);
    }
    void visit(const Select *op) override {
        out << "select(";
        print(op->condition);
        out << ", ";
        print(op->true_value);
        out << ", ";
        print(op->false_value);
        out << ")";
    }
    void visit(const Load *op) override {
        out << op->name << "[";
        print(op->index);
        out << "]";
        if (op->predicate.defined()) {
            out << " if ";
            print(op->predicate);
        }
    }
    void visit(const Ramp *op) override {
        out << "ramp(";
        print(op->base);
        out << ", ";
        print(op->stride);
        out << ", " << op->lanes << ")";
    }
    void visit(const Broadcast *op) override {
        out << "x" << op->lanes << "(";
        print(op->value);
        out << ")";
    }
    void visit(const Let *op) override {
        out << "(let " << op->name << " = ";
        print(op->value);
        out << " in ";
        print(op->body);
        out << ")";
    }
    void visit(const Call *op) override {
        out << op->name << "(";
        print_list(op->args);
        out << ")";
        // One value of a multi-valued Func is written as in the source: f(x)[1].
        bool multi_valued = op->func && op->func->output_types.size() > 1;
        if (op->value_index || multi_valued) out << "[" << op->value_index << "]";
    }

    void visit(const LetStmt *op) override {
        do_indent();
        out << "let " << op->name << " = ";
        print(op->value);
        out << "\n";
        print(op->body);
    }
    void visit(const AssertStmt *op) override {
        do_indent();
        out << "assert(";
        print(op->condition);
        out << ", \"" << op->message << "\"";
        for (const Expr &a : op->args) {
            out << ", ";
            print(a);
        }
        out << ")\n";
    }
    void visit(const For *op) override {
        do_indent();
        out << for_type_name(op->for_type) << " (" << op->name << ", ";
        print(op->min);
        out << ", ";
        print(op->extent);
        out << ") {\n";
        body(op->body);
        do_indent();
        out << "}\n";
    }
    void visit(const Provide *op) override {
        do_indent();
        out << op->name << "(";
        print_list(op->args);
        out << ") = ";
        if (op->values.size() > 1) out << "{";
        print_list(op->values);
        if (op->values.size() > 1) out << "}";
        out << "\n";
    }
    void visit(const Realize *op) override {
        do_indent();
        out << "realize " << op->name << "(";
        for (size_t i = 0; i < op->bounds.size(); i++) {
            if (i) out << ", ";
            out << op->bounds[i];
        }
        out << ")";
        if (op->memory_type != MemoryType::Auto) out << " in " << memory_type_name(op->memory_type);
        if (op->condition.defined()) {
            out << " if ";
            print(op->condition);
        }
        out << " {\n";
        body(op->body);
        do_indent();
        out << "}\n";
    }
    void visit(const Store *op) override {
        do_indent();
        out << op->name << "[";
        print(op->index);
        out << "] = ";
        print(op->value);
        if (op->predicate.defined()) {
            out << " if ";
            print(op->predicate);
        }
        out << "\n";
    }
    void visit(const Allocate *op) override {
        do_indent();
        out << "allocate " << op->name << "[" << op->type;
        for (const Expr &e : op->extents) {
            out << " * ";
            print(e);
        }
        out << "]";
        if (op->memory_type != MemoryType::Auto) out << " in " << memory_type_name(op->memory_type);
        if (op->condition.defined()) {
            out << " if ";
            print(op->condition);
        }
        out << "\n";
        print(op->body);
    }
    void visit(const Free *op) override {
        do_indent();
        out << "free " << op->name << "\n";
    }
    void visit(const Block *op) override {
        print(op->first);
        print(op->rest);
    }
    void visit(const IfThenElse *op) override {
        do_indent();
        out << "if (";
        print(op->condition);
        out << ") {\n";
        body(op->then_case);
        if (op->else_case.defined()) {
            do_indent();
            out << "} else {\n";
            body(op->else_case);
        }
        do_indent();
        out << "}\n";
    }
    void visit(const Evaluate *op) override {
        do_indent();
        print(op->value);
        out << "\n";
    }
    void visit(const ProducerConsumer *op) override {
        do_indent();
        out << (op->is_producer ? "produce " : "consume ") << op->name << " {\n";
        body(op->body);
        do_indent();
        out << "}\n";
    }
};

} // namespace

std::ostream &operator<<(std::ostream &s, const Expr &e) {
    IRPrinter(s).print(e);
    return s;
}

std::ostream &operator<<(std::ostream &s, const Stmt &st) {
    IRPrinter(s).print(st);
    return s;
}

std::ostream &operator<<(std::ostream &s, const Range &r) {
    return s << "[" << r.min << ", " << r.extent << "]";
}

std::string to_string(const Expr &e) {
    std::ostringstream s;
    s << e;
    return s.str();
}

std::string to_string(const Stmt &st) {
    std::ostringstream s;
    s << st;
    return s.str();
}

} // namespace kiln
