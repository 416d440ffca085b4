// Compiles a lowered function in process with LLVM's ORC LLJIT and hands back callable entry
// points. The machine code is the same object file compile_to_object writes, linked into this
// process against the kiln runtime and libm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codegen/Target.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

class JITModule {
public:
    /// `int32_t name_argv(void **args)`: args[i] points to the i-th buffer pointer or scalar.
    using ArgvFunction = int32_t (*)(void **args);

    /// Compiles f for t, which must describe this machine (the default), and loads it.
    explicit JITModule(const LoweredFunc &f, const Target &t = Target::host(),
                       const std::string &device_source = "");
    JITModule(JITModule &&) noexcept;
    JITModule &operator=(JITModule &&) noexcept;
    ~JITModule();

    const std::string &name() const;
    const Target &target() const;

    /// The argv entry point.
    ArgvFunction argv_function() const;
    /// The address of the typed entry point `int32_t name(kiln_buffer_t *, scalars...)`; cast
    /// it to the matching function pointer type.
    void *entry_address() const;
    /// Calls the argv entry point; returns kiln_success or an error code (see
    /// kiln_last_error_message).
    int32_t call(void **args) const { return argv_function()(args); }

    /// The optimized LLVM IR.
    std::string llvm_ir() const;
    /// The assembly of the loaded code.
    std::string assembly() const;
    /// Wall time of code generation, optimization, machine code and linking, in milliseconds.
    double compile_time_ms() const;

private:
    struct Impl;
    std::unique_ptr<Impl> pimpl;
};

} // namespace kiln
