#include "lang/IREquality.h"

#include <cstring>
#include <tuple>

#include "lang/Error.h"

namespace kiln {

namespace {

// The fields that make up each node's identity, listed once and used by both compare and hash.
auto fields(const IntImm *op) {
    return std::tie(op->value);
}
auto fields(const UIntImm *op) {
    return std::tie(op->value);
}
auto fields(const FloatImm *op) {
    return std::tie(op->value);
}
auto fields(const Cast *op) {
    return std::tie(op->value);
}
auto fields(const Variable *op) {
    return std::tie(op->name);
}
auto fields(const Add *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Sub *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Mul *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Div *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Mod *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Min *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Max *op) {
    return std::tie(op->a, op->b);
}
auto fields(const EQ *op) {
    return std::tie(op->a, op->b);
}
auto fields(const NE *op) {
    return std::tie(op->a, op->b);
}
auto fields(const LT *op) {
    return std::tie(op->a, op->b);
}
auto fields(const LE *op) {
    return std::tie(op->a, op->b);
}
auto fields(const GT *op) {
    return std::tie(op->a, op->b);
}
auto fields(const GE *op) {
    return std::tie(op->a, op->b);
}
auto fields(const And *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Or *op) {
    return std::tie(op->a, op->b);
}
auto fields(const Not *op) {
    return std::tie(op->a);
}
auto fields(const Select *op) {
    return std::tie(op->condition, op->true_value, op->false_value);
}
auto fields(const Load *op) {
    return std::tie(op->name, op->index, op->predicate);
}
auto fields(const Ramp *op) {
    return std::tie(op->base, op->stride, op->lanes);
}
auto fields(const Broadcast *op) {
    return std::tie(op->value, op->lanes);
}
auto fields(const Let *op) {
    return std::tie(op->name, op->value, op->body);
}
auto fields(const Call *op) {
    return std::tie(op->name, op->call_type, op->value_index, op->args);
}
auto fields(const LetStmt *op) {
    return std::tie(op->name, op->value, op->body);
}
auto fields(const AssertStmt *op) {
    return std::tie(op->condition, op->message, op->args, op->error_code);
}
auto fields(const For *op) {
    return std::tie(op->name, op->min, op->extent, op->for_type, op->body);
}
auto fields(const Provide *op) {
    return std::tie(op->name, op->values, op->args);
}
auto fields(const Realize *op) {
    return std::tie(op->name, op->types, op->memory_type, op->bounds, op->condition, op->body);
}
auto fields(const Store *op) {
    return std::tie(op->name, op->value, op->index, op->predicate);
}
auto fields(const Allocate *op) {
    return std::tie(op->name, op->type, op->memory_type, op->extents, op->condition, op->body);
}
auto fields(const Free *op) {
    return std::tie(op->name);
}
auto fields(const Block *op) {
    return std::tie(op->first, op->rest);
}
auto fields(const IfThenElse *op) {
    return std::tie(op->condition, op->then_case, op->else_case);
}
auto fields(const Evaluate *op) {
    return std::tie(op->value);
}
auto fields(const ProducerConsumer *op) {
    return std::tie(op->name, op->is_producer, op->body);
}

template <typename T>
int cmp_value(const T &a, const T &b) {
    return a < b ? -1 : (b < a ? 1 : 0);
}

int cmp(const Expr &a, const Expr &b);
int cmp(const Stmt &a, const Stmt &b);
int cmp(const std::string &a, const std::string &b) {
    return a.compare(b) < 0 ? -1 : a == b ? 0 : 1;
}
int cmp(int64_t a, int64_t b) {
    return cmp_value(a, b);
}
int cmp(uint64_t a, uint64_t b) {
    return cmp_value(a, b);
}
int cmp(int a, int b) {
    return cmp_value(a, b);
}
int cmp(bool a, bool b) {
    return cmp_value(a, b);
}
int cmp(double a, double b) {
    // Bitwise, so that NaN equals itself and -0.0 differs from 0.0.
    uint64_t x, y;
    std::memcpy(&x, &a, 8);
    std::memcpy(&y, &b, 8);
    return cmp_value(x, y);
}
int cmp(const Type &a, const Type &b) {
    if (int c = cmp_value(a.code, b.code)) return c;
    if (int c = cmp_value(a.bits, b.bits)) return c;
    return cmp_value(a.lanes, b.lanes);
}
int cmp(ForType a, ForType b) {
    return cmp_value(a, b);
}
int cmp(MemoryType a, MemoryType b) {
    return cmp_value(a, b);
}
int cmp(Call::CallType a, Call::CallType b) {
    return cmp_value(a, b);
}
int cmp(const Range &a, const Range &b) {
    if (int c = cmp(a.min, b.min)) return c;
    return cmp(a.extent, b.extent);
}
template <typename T>
int cmp(const std::vector<T> &a, const std::vector<T> &b) {
    if (int c = cmp_value(a.size(), b.size())) return c;
    for (size_t i = 0; i < a.size(); i++) {
        if (int c = cmp(a[i], b[i])) return c;
    }
    return 0;
}

template <typename Tuple, size_t... I>
int cmp_tuples(const Tuple &a, const Tuple &b, std::index_sequence<I...>) {
    int result = 0;
    ((result == 0 ? (result = cmp(std::get<I>(a), std::get<I>(b))) : 0), ...);
    return result;
}

template <typename T>
int cmp_node(const IRNode *a, const IRNode *b) {
    auto fa = fields(static_cast<const T *>(a));
    auto fb = fields(static_cast<const T *>(b));
    return cmp_tuples(fa, fb, std::make_index_sequence<std::tuple_size_v<decltype(fa)>>());
}

int cmp_nodes(const IRNode *a, const IRNode *b) {
    if (a == b) return 0;
    if (!a) return -1;
    if (!b) return 1;
    if (int c = cmp_value(a->node_type, b->node_type)) return c;
    switch (a->node_type) {
#define EXPR_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        return cmp_node<Name>(a, b);
#define STMT_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        return cmp_node<Name>(a, b);
#include "lang/IRNodes.def"
    }
    internal_error("unknown node kind");
}

int cmp(const Expr &a, const Expr &b) {
    if (a.same_as(b)) return 0;
    if (a.defined() && b.defined()) {
        if (int c = cmp(a.type(), b.type())) return c;
    }
    return cmp_nodes(a.get(), b.get());
}

int cmp(const Stmt &a, const Stmt &b) {
    if (a.same_as(b)) return 0;
    return cmp_nodes(a.get(), b.get());
}

// Hashing: the same walk, mixing each field into a running 64-bit value.
void mix(size_t &h, size_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

void hash_into(size_t &h, const Expr &e);
void hash_into(size_t &h, const Stmt &s);
void hash_into(size_t &h, const std::string &v) {
    mix(h, std::hash<std::string>()(v));
}
void hash_into(size_t &h, int64_t v) {
    mix(h, std::hash<int64_t>()(v));
}
void hash_into(size_t &h, uint64_t v) {
    mix(h, std::hash<uint64_t>()(v));
}
void hash_into(size_t &h, int v) {
    mix(h, std::hash<int>()(v));
}
void hash_into(size_t &h, bool v) {
    mix(h, v ? 1 : 2);
}
void hash_into(size_t &h, double v) {
    uint64_t x;
    std::memcpy(&x, &v, 8);
    mix(h, x);
}
void hash_into(size_t &h, const Type &t) {
    mix(h, (size_t(t.code) << 24) | (t.bits << 16) | t.lanes);
}
void hash_into(size_t &h, ForType v) {
    mix(h, size_t(v));
}
void hash_into(size_t &h, MemoryType v) {
    mix(h, size_t(v));
}
void hash_into(size_t &h, Call::CallType v) {
    mix(h, size_t(v));
}
void hash_into(size_t &h, const Range &r) {
    hash_into(h, r.min);
    hash_into(h, r.extent);
}
template <typename T>
void hash_into(size_t &h, const std::vector<T> &v) {
    mix(h, v.size());
    for (const T &x : v)
        hash_into(h, x);
}

template <typename T>
void hash_node(size_t &h, const IRNode *n) {
    auto f = fields(static_cast<const T *>(n));
    std::apply([&](const auto &...x) { (hash_into(h, x), ...); }, f);
}

void hash_node_any(size_t &h, const IRNode *n) {
    if (!n) {
        mix(h, 0x51);
        return;
    }
    mix(h, size_t(n->node_type) + 1);
    switch (n->node_type) {
#define EXPR_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        hash_node<Name>(h, n);                                                                     \
        return;
#define STMT_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        hash_node<Name>(h, n);                                                                     \
        return;
#include "lang/IRNodes.def"
    }
}

void hash_into(size_t &h, const Expr &e) {
    if (e.defined()) hash_into(h, e.type());
    hash_node_any(h, e.get());
}

void hash_into(size_t &h, const Stmt &s) {
    hash_node_any(h, s.get());
}

} // namespace

int compare(const Expr &a, const Expr &b) {
    return cmp(a, b);
}
int compare(const Stmt &a, const Stmt &b) {
    return cmp(a, b);
}
bool equal(const Expr &a, const Expr &b) {
    return cmp(a, b) == 0;
}
bool equal(const Stmt &a, const Stmt &b) {
    return cmp(a, b) == 0;
}

size_t structural_hash(const Expr &e) {
    size_t h = 0;
    hash_into(h, e);
    return h;
}

size_t structural_hash(const Stmt &s) {
    size_t h = 0;
    hash_into(h, s);
    return h;
}

} // namespace kiln
