// Internal to codegen/CodeGenDevice.cpp: the expression half of the device printer (C syntax of
// CUDA and OpenCL, identifiers, literals, the helper functions of the preamble).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/Target.h"
#include "lang/IR.h"

namespace kiln::device {

/// C precedence levels, tightest first, of the text an expression prints to.
enum Precedence : int {
    Primary = 0, ///< names, literals, calls, subscripts, parenthesized text
    Unary = 2,   ///< casts, !, negative literals
    Multiplicative = 3,
    Additive = 4,
    Shift = 5,
    Relational = 6,
    Equality = 7,
    BitAnd = 8,
    LogicalAnd = 11,
    LogicalOr = 12,
    Conditional = 13,
};

/// Printed C text and the precedence of its outermost operator.
struct Code {
    std::string text;
    int precedence = Primary;
    /// OpenCL bool vectors are masks (-1 true, 0 false) of a signed integer vector type: its
    /// element bits; 0 for everything else.
    int mask_bits = 0;
};

/// The text of c, parenthesized when its operator binds more loosely than `loosest`.
std::string wrap(const Code &c, int loosest);

/// The typedefs and helper functions a program uses, each printed once in its preamble.
class Preamble {
public:
    explicit Preamble(GpuApi api) : api(api) {}
    /// Registers a helper (name and full definition) the first time; returns its name.
    const std::string &use(const std::string &name, const std::string &definition);
    void use_type(Type t);
    /// The preamble text: pragmas, typedefs, then the helpers in name order.
    std::string text() const;

private:
    GpuApi api;
    std::map<std::string, std::string> definitions; ///< by name, printed in name order
    bool fp64 = false;
    std::set<int> typedefs; ///< CUDA: code * 100 + bits of the stdint types used
};

/// C identifiers for IR names: deterministic, unique within a kernel, never a keyword or a name
/// of the dialect or of kiln's helpers.
class NameTable {
public:
    /// Reserves a program-wide name (a kernel's) in every kernel.
    static bool is_reserved(const std::string &name);
    explicit NameTable(const std::set<std::string> &globals) : used(globals) {}
    /// A new identifier for an IR name: the name with '.', '$' and the like as '_', with a
    /// numeric suffix when that is taken.
    std::string fresh(const std::string &ir_name);

    /// Scoped bindings of IR names (variables; memory has its own table) to identifiers.
    void push(const std::string &ir_name, const std::string &c_name) {
        bound[ir_name].push_back(c_name);
    }
    void pop(const std::string &ir_name);
    const std::string *find(const std::string &ir_name) const;

private:
    std::set<std::string> used;
    std::map<std::string, std::vector<std::string>> bound;
};

/// A buffer argument or allocation as device code names it.
struct Memory {
    std::string c_name;
    Type type; ///< element type
};

/// Prints expressions, lane by lane for vectors. A Let inside an expression becomes a
/// declaration (`const T name = value;`) appended to `pending`, which the statement printer emits
/// before the statement that uses it.
class ExprPrinter {
public:
    ExprPrinter(GpuApi api, Preamble &preamble, NameTable &names,
                std::map<std::string, std::vector<Memory>> &memory)
        : api(api), preamble(preamble), names(names), memory(memory) {}

    /// The text of lane `lane` of e (any lane of a scalar is the scalar).
    std::string print(const Expr &e, int lane = 0) { return expr(e, lane).text; }
    Code expr(const Expr &e, int lane);

    /// The C name of the element type of t (bool for bool, also in OpenCL).
    std::string type_name(Type t);
    /// The element type of t in memory: bool is uchar in OpenCL.
    std::string memory_type_name(Type t);
    /// The initializer list of all lanes of a vector: {lane0, lane1, ...}.
    std::string lanes_list(const Expr &e);
    /// The declaration of an IR name bound to e: a const scalar, an OpenCL vector, or a const
    /// array of lanes.
    std::string declaration(const std::string &c_name, const Expr &e);
    /// Lane `lane` of a vector declared by declaration(), as a scalar of its element type.
    Code lane_of(const std::string &c_name, int lane);
    /// The C name of e when it is a variable declared as an OpenCL vector; empty otherwise.
    std::string vector_variable(const Expr &e);

    /// Whether vectors of type t print as OpenCL vector types (float4, int8, ...): OpenCL and
    /// 2, 3, 4, 8 or 16 lanes. Other vectors are printed lane by lane.
    bool native_vector(Type t) const;
    /// A whole vector of a native_vector type; bool vectors are masks (see Code::mask_bits).
    Code vexpr(const Expr &e);
    /// The first lane of a dense vector index (a ramp of stride 1, directly or through a vector
    /// let), if it is one.
    std::optional<Code> dense_base(const Expr &index);
    bool is_dense(const Expr &index);
    /// OpenCL vector type name: float4, or for bool vectors the mask type of `mask_bits` bits.
    std::string vector_type_name(Type t, int mask_bits = 32);
    /// A mask converted to `bits`-bit elements (-1 stays -1).
    Code convert_mask(const Code &m, int bits, int lanes);
    const Memory &find_memory(const std::string &ir_name) const;

    /// Declarations made by Lets inside expressions, in order; the caller empties it.
    std::vector<std::string> pending;
    /// Forgets the Lets declared while printing the previous statement (a Let printed for
    /// several lanes of one statement is declared once).
    void begin_statement() {
        declared_lets.clear();
        declared_loads.clear();
    }

    /// CUDA: the vector type (float4, int2, ...) whole-vector accesses of t use, if t has one:
    /// 2 or 4 lanes of 32-bit elements.
    std::optional<std::string> cuda_vector_name(Type t);
    /// CUDA: the statement storing a dense, unpredicated vector with one helper call (a vector
    /// store where the address is aligned), if the store is one.
    std::optional<std::string> cuda_vector_store(const Store *op, const Memory &m);

private:
    GpuApi api;
    Preamble &preamble;
    NameTable &names;
    std::map<std::string, std::vector<Memory>> &memory;
    std::map<const Let *, std::string> declared_lets;
    /// CUDA: dense vector loads declared for the current statement (a float4 each).
    std::map<const Load *, std::string> declared_loads;
    /// Variables declared as OpenCL vectors: their mask bits (0 unless bool).
    std::map<std::string, int> vector_vars;
    /// Vector variables that hold dense ramps (base, base + 1, ...).
    std::set<std::string> dense_vars;

    bool cuda() const { return api == GpuApi::CUDA; }
    Code literal(const Expr &e);
    Code int_literal(Type t, int64_t v);
    Code uint_literal(Type t, uint64_t v);
    Code float_literal(Type t, double v);
    Code variable(const Variable *op, int lane);
    Code arith(const Expr &e, int lane);
    Code in_unsigned(const Expr &e, Type t, int lane);
    Code div_mod(const Expr &e, int lane);
    Code min_max(const Expr &e, int lane);
    Code compare(const Expr &a, const Expr &b, const char *op, int precedence, int lane);
    Code logical(const Expr &a, const Expr &b, bool is_and, int lane);
    Code select(const Select *op, int lane);
    Code cast(const Cast *op, int lane);
    /// A scalar of type from converted to type to (bfloat16 through float32, both ways).
    Code convert(const Code &v, Type from, Type to);
    Code float_to_int(const Code &v, Type from, Type to);
    /// bfloat16 bits (uint16_t, ushort or ushortN) to float32 (exactly), and float32 to bfloat16
    /// bits (to nearest even); lanes > 1 are OpenCL vectors.
    Code bfloat16_to_float(const Code &v, int lanes);
    Code float_to_bfloat16(const Code &v, int lanes);
    /// Either of the two: the helper's name and definition (once per source) and its call.
    Code bfloat16_conversion(const Code &v, int lanes, bool to_float);
    Code load(const Load *op, int lane);
    /// CUDA: lane `lane` of a dense vector load read whole (declared once per statement), if
    /// the load is one.
    std::optional<Code> cuda_vector_load(const Load *op, int lane);
    /// CUDA: the helper loading (or storing) a vector of type t whole, registered in the preamble.
    std::string cuda_vector_helper(Type t, bool store);
    Code ramp_lane(const Ramp *op, int lane);
    Code let(const Let *op, int lane);
    /// Declares a Let's value (once per statement) and prints its body with the name bound.
    Code with_let(const Let *op, const std::function<Code()> &body);
    Code call(const Call *op, int lane);
    Code math(const Call *op, int lane);
    std::string helper_call(const std::string &name, const std::vector<Code> &args);
    std::string unsigned_name(Type t);

    // codegen/CodeGenDeviceVector.cpp: OpenCL vector expressions.
    Code lanes_constructor(const Expr &e);
    Code broadcast_vector(const Broadcast *op);
    Code ramp_vector(const Ramp *op);
    Code arith_vector(const Expr &e);
    Code in_unsigned_vector(const Expr &e, Type t);
    Code min_max_vector(const Expr &e);
    Code compare_vector(const Expr &a, const Expr &b, const char *op, int precedence);
    Code logical_vector(const Expr &a, const Expr &b, bool is_and);
    Code select_vector(const Select *op);
    Code cast_vector(const Cast *op);
    /// A whole vector of `lanes` lanes of type from converted to type to.
    Code convert_vector(const Code &v, Type from, Type to, int lanes);
    Code load_vector(const Load *op);
    Code call_vector(const Call *op);
    Code per_lane(const std::string &function, const std::vector<Expr> &args, Type result);
};

/// Lane `lane` of a ramp as a scalar expression: base + lane * stride.
Expr ramp_lane_expr(const Ramp *op, int lane);

/// Internal error when e computes on bfloat16 (arithmetic, comparisons, math calls, ramps):
/// device code only loads, stores, converts and selects it (lang/Type.h).
void check_no_bfloat16_arithmetic(const Expr &e);

/// The type suffix of helper names: i32, u8, f64, b, bf16.
std::string type_suffix(Type t);

/// Helper definitions (the full text of a C function named name).
std::string div_helper(GpuApi api, const std::string &name, Type t, const std::string &type,
                       const std::string &domain, bool is_mod);
std::string float_mod_helper(GpuApi api, const std::string &name, Type t, const std::string &type);
std::string round_helper(const std::string &name, Type t, const std::string &type);
std::string min_max_helper(GpuApi api, const std::string &name, const std::string &type,
                           bool is_min);
std::string abs_helper(GpuApi api, const std::string &name, Type t, const std::string &type,
                       const std::string &result);
/// bfloat16 bits to float32 and float32 to bfloat16 bits (round to nearest even; a NaN stays a
/// quiet NaN with its sign, as bfloat16_bits_of in lang/BFloat16.h), given the dialect's names of
/// the bits, uint32 and float32 types (vector types when lanes > 1, OpenCL only).
std::string bfloat16_to_float_helper(GpuApi api, const std::string &name, int lanes,
                                     const std::string &bits_type, const std::string &uint_type,
                                     const std::string &float_type);
std::string float_to_bfloat16_helper(GpuApi api, const std::string &name, int lanes,
                                     const std::string &bits_type, const std::string &uint_type,
                                     const std::string &float_type);
std::string float_to_int_helper(const std::string &name, Type from, Type to,
                                const std::string &from_type, const std::string &to_type,
                                const std::string &min_text, const std::string &max_text);

} // namespace kiln::device
