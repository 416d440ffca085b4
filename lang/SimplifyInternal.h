// Internals of the simplifier, shared by its source files and by nothing else (include
// lang/Simplify.h instead):
//   Simplify.cpp        entry points, lets, variables and statements
//   SimplifyBounds.cpp  constant intervals of integer expressions
//   SimplifyLinear.cpp  linear forms, constant folding, canonical operand order
//   SimplifyArith.cpp   + - * / %, casts and ramps
//   SimplifyLogic.cpp   min and max, comparisons, && || !, select
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lang/IREquality.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/Simplify.h"

namespace kiln::simplify_internal {

// Interval endpoints and constant arithmetic use 128 bits, so that every value of every integer
// type (uint64 included) and every sum or product of two of them is exact.
using Int128 = __int128;

// A constant interval of an integer expression; a missing side is unbounded.
struct ConstInterval {
    std::optional<Int128> min, max;
    static ConstInterval point(Int128 v) { return {v, v}; }
};

// Signed 32- and 64-bit arithmetic is assumed not to overflow, as in Halide: index arithmetic
// never does in practice, and without the assumption x + 1 > x could not be simplified. Narrower
// and unsigned types wrap, and every rewrite on them is exact under wrapping.
inline bool assumes_no_overflow(Type t) {
    return t.is_int() && t.bits >= 32;
}

ConstInterval type_range(Type t);
// The mathematical value of an integer constant (a bool counts as 0 or 1).
std::optional<Int128> const_value(const Expr &e);
Int128 floor_div(Int128 a, Int128 b);
Int128 floor_mod(Int128 a, Int128 b);
Int128 abs128(Int128 a);
Int128 gcd128(Int128 a, Int128 b);
bool is_positive_power_of_two(Int128 c);

// A sum of integer terms with constant coefficients plus a constant, in the arithmetic of one
// type. Coefficients are kept modulo 2^64, which is exact modulo 2^bits for every width, so that
// collecting terms is exact for wrapping types too. A term is never a constant, a sum, a
// difference or a product with a constant.
struct LinearForm {
    Type type;
    std::map<Expr, uint64_t, ExprLess> terms;
    uint64_t constant = 0;
    explicit LinearForm(Type t) : type(t) {}
};

// A coefficient as a signed number in the range of the type's width.
int64_t signed_coefficient(Type t, uint64_t c);
// Adds coefficient * e to f.
void collect(const Expr &e, uint64_t coefficient, LinearForm &f);
LinearForm linear(const Expr &e);
// a - b.
LinearForm difference(const Expr &a, const Expr &b);
// The canonical expression of a linear form.
Expr rebuild(const LinearForm &f);
// The terms with positive coefficients and, negated, those with negative ones, without constants.
void split_signs(const LinearForm &f, LinearForm &positive, LinearForm &negative);
// f / g, for a g that divides every coefficient and the constant.
LinearForm scaled_down(const LinearForm &f, Int128 g);

// Constant folding with exactly the semantics of IR.h. It is written apart from ExprEvaluator on
// purpose: the fuzzer compares the two.
std::optional<Expr> fold_arith(IRNodeType op, const Expr &a, const Expr &b);
std::optional<bool> fold_compare(IRNodeType op, const Expr &a, const Expr &b);
std::optional<Expr> fold_cast(Type t, const Expr &e);
Expr make_bool(bool v, int lanes);

// Whether the operands of a commutative node should be swapped into canonical order: constants
// last, otherwise by the structural order.
bool should_swap(const Expr &a, const Expr &b);

// The operands of a chain of one associative node kind, such as min(min(a, b), c).
template <typename Op>
void flatten(const Expr &e, std::vector<Expr> &out) {
    if (const auto *op = e.as<Op>()) {
        flatten<Op>(op->a, out);
        flatten<Op>(op->b, out);
        return;
    }
    out.push_back(e);
}

// The chain of operands in canonical order, associated to the left.
template <typename Op>
Expr rebuild_chain(std::vector<Expr> operands) {
    std::stable_sort(operands.begin(), operands.end(),
                     [](const Expr &a, const Expr &b) { return should_swap(b, a); });
    Expr acc = operands[0];
    for (size_t i = 1; i < operands.size(); i++)
        acc = Op::make(acc, operands[i]);
    return acc;
}

template <typename Op>
Expr unchanged_or(const Op *op, const Expr &a, const Expr &b) {
    if (a.same_as(op->a) && b.same_as(op->b)) return Expr(op);
    return Op::make(a, b);
}

// The bottom-up rewriter. Every visit returns a simplified node built from simplified children.
class Simplifier : public IRMutator {
public:
    explicit Simplifier(const std::map<std::string, ConstantBounds> &bounds);
    using IRMutator::mutate;

    // A constant interval containing every value of the integer expression e in the current
    // scope; unbounded sides for other types.
    ConstInterval bounds_of(const Expr &e);
    // An interval of a - b computed in unbounded integers, for integer expressions a and b.
    ConstInterval difference_bounds(const Expr &a, const Expr &b);
    // Whether a <= b always holds.
    bool prove_le(const Expr &a, const Expr &b);

protected:
    using IRMutator::visit;

    Expr visit(const Variable *op) override;
    Expr visit(const Let *op) override;
    Expr visit(const Add *op) override;
    Expr visit(const Sub *op) override;
    Expr visit(const Mul *op) override;
    Expr visit(const Div *op) override;
    Expr visit(const Mod *op) override;
    Expr visit(const Min *op) override;
    Expr visit(const Max *op) override;
    Expr visit(const LT *op) override;
    Expr visit(const LE *op) override;
    Expr visit(const GT *op) override;
    Expr visit(const GE *op) override;
    Expr visit(const EQ *op) override;
    Expr visit(const NE *op) override;
    Expr visit(const Not *op) override;
    Expr visit(const And *op) override;
    Expr visit(const Or *op) override;
    Expr visit(const Select *op) override;
    Expr visit(const Cast *op) override;
    Expr visit(const Ramp *op) override;
    Expr visit(const Call *op) override;

    Stmt visit(const LetStmt *op) override;
    Stmt visit(const For *op) override;
    Stmt visit(const IfThenElse *op) override;
    Stmt visit(const AssertStmt *op) override;
    Stmt visit(const Evaluate *op) override;
    Stmt visit(const Block *op) override;
    Stmt visit(const ProducerConsumer *op) override;
    Stmt visit(const Realize *op) override;
    Stmt visit(const Allocate *op) override;

private:
    // Known intervals of integer variables, lets being substituted, and the alignment (see
    // alignment()) of the integer scalar lets that are not, by name.
    std::map<std::string, ConstInterval> var_bounds;
    std::map<std::string, Expr> replacements;
    std::map<std::string, std::pair<Int128, Int128>> let_alignments;

    // Binds a name for the extent of a let body or loop, hiding any outer binding of the name.
    class ScopedName {
    public:
        ScopedName(Simplifier &s, const std::string &name, const Expr &replacement,
                   std::optional<ConstInterval> bounds,
                   std::optional<std::pair<Int128, Int128>> alignment = std::nullopt);
        ~ScopedName();
        ScopedName(const ScopedName &) = delete;
        ScopedName &operator=(const ScopedName &) = delete;

    private:
        Simplifier &s;
        std::string name;
        Expr old_replacement;
        std::optional<std::pair<Int128, Int128>> old_alignment;
        std::optional<ConstInterval> old_bounds;
    };

    std::optional<ConstInterval> bounds_for_binding(const Expr &value);
    template <typename Node, typename Body>
    Body visit_let(const Node *op);

    // An operation on two non-constant broadcasts is a broadcast of the operation.
    template <typename Op>
    std::optional<Expr> broadcast_rule(const Expr &a, const Expr &b) {
        const auto *ba = a.as<Broadcast>(), *bb = b.as<Broadcast>();
        if (!ba || !bb || is_const(a) || is_const(b)) return std::nullopt;
        return Broadcast::make(mutate(Op::make(ba->value, bb->value)), ba->lanes);
    }
    std::optional<Expr> ramp_add_rule(const Expr &a, const Expr &b, bool subtract);
    // An integer vector sum of one ramp (any coefficient), broadcasts and a constant: one ramp.
    std::optional<Expr> ramp_of_linear_form(const LinearForm &f);
    // ramp / broadcast(c) and ramp % broadcast(c) when every lane is in the same block of c.
    std::optional<Expr> ramp_in_one_block_rule(const Expr &a, const Expr &b, bool divide);
    // e == remainder (mod modulus) for an integer scalar e, from its linear form and the
    // alignments of the lets in scope; a modulus of 0 means e == remainder.
    std::pair<Int128, Int128> alignment(const Expr &e);
    // a / c and a % c for a constant c > 0.
    Expr divide(const Expr &a, Int128 c);
    Expr modulo(const Expr &a, Int128 c);

    bool dominates(const Expr &kept, const Expr &e, bool is_min);
    template <typename Op>
    Expr visit_min_max(const Op *op, bool is_min);
    // a < b (LT), a <= b (LE), a == b (EQ) or a != b (NE) on simplified operands.
    Expr compare_rule(IRNodeType kind, const Expr &a, const Expr &b);
    // !a for a simplified a.
    Expr negation(const Expr &a);
    template <typename Op>
    Expr visit_and_or(const Op *op, bool is_and);
};

} // namespace kiln::simplify_internal
