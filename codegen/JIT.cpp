#include "codegen/JIT.h"

#include <chrono>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/MemoryBuffer.h>

#include "codegen/CodeGenLLVM.h"
#include "codegen/LLVMModuleImpl.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"

namespace kiln {

namespace {

template <typename T>
T check(llvm::Expected<T> value, const char *what) {
    if (!value) internal_error("jit: ", what, ": ", llvm::toString(value.takeError()));
    return std::move(*value);
}

void check(llvm::Error error, const char *what) {
    if (error) internal_error("jit: ", what, ": ", llvm::toString(std::move(error)));
}

/// The runtime functions generated code calls, bound by address: a statically linked runtime
/// is usually not visible to dlsym.
llvm::orc::SymbolMap runtime_symbols(llvm::orc::LLJIT &jit) {
    llvm::orc::SymbolMap symbols;
    auto add = [&](const char *name, auto *function) {
        symbols[jit.mangleAndIntern(name)] = llvm::orc::ExecutorSymbolDef(
            llvm::orc::ExecutorAddr::fromPtr(function),
            llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
    };
    add("kiln_error", &kiln_error);
    add("kiln_malloc", &kiln_malloc);
    add("kiln_free", &kiln_free);
    add("kiln_parallel_for", &kiln_parallel_for);
    add("kiln_profiler_switch", &kiln_profiler_switch);
    add("kiln_amx_request", &kiln_amx_request);
    add("kiln_buffer_check", &kiln_buffer_check);
    add("kiln_device_launch", &kiln_device_launch);
    add("kiln_device_interface", &kiln_device_interface);
    add("kiln_buffer_copy_to_device", &kiln_buffer_copy_to_device);
    add("kiln_buffer_prepare_output", &kiln_buffer_prepare_output);
    add("kiln_buffer_copy_to_host", &kiln_buffer_copy_to_host);
    add("kiln_buffer_set_host_dirty", &kiln_buffer_set_host_dirty);
    add("kiln_buffer_set_device_dirty", &kiln_buffer_set_device_dirty);
    add("kiln_device_buffer_wrap", &kiln_device_buffer_wrap);
    add("kiln_device_buffer_release", &kiln_device_buffer_release);
    return symbols;
}

} // namespace

struct JITModule::Impl {
    LLVMModule module;
    std::unique_ptr<llvm::orc::LLJIT> jit;
    ArgvFunction argv = nullptr;
    void *entry = nullptr;
    double compile_ms = 0;
};

JITModule::JITModule(const LoweredFunc &f, const Target &t, const std::string &device_source) {
    auto start = std::chrono::steady_clock::now();
    LLVMModule module = compile_to_llvm_module(f, t, device_source);
    std::string object = module.object_code();

    llvm::orc::JITTargetMachineBuilder machine{llvm::Triple(t.triple)};
    machine.setCPU(t.cpu);
    machine.getFeatures() = llvm::SubtargetFeatures(t.features);
    // Only object files are added: no IR layer platform is needed, and the data layout is the
    // one the object was compiled with. Process symbols are searched explicitly below.
    std::unique_ptr<llvm::orc::LLJIT> jit =
        check(llvm::orc::LLJITBuilder()
                  .setJITTargetMachineBuilder(std::move(machine))
                  .setDataLayout(module.impl().module->getDataLayout())
                  .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                  .setLinkProcessSymbolsByDefault(false)
                  .create(),
              "cannot create LLJIT");
    llvm::orc::JITDylib &library = jit->getMainJITDylib();
    check(library.define(llvm::orc::absoluteSymbols(runtime_symbols(*jit))),
          "cannot define runtime symbols");
    // libm and libc (memset, expf, tanhf, ...) come from the process itself.
    library.addGenerator(check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                                   jit->getDataLayout().getGlobalPrefix()),
                               "cannot search the process for symbols"));
    check(jit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, f.name)),
          "cannot add the object file");
    auto argv = check(jit->lookup(f.name + "_argv"), "cannot find the argv entry point");
    auto entry = check(jit->lookup(f.name), "cannot find the entry point");

    pimpl = std::unique_ptr<Impl>(new Impl{std::move(module), std::move(jit), nullptr, nullptr, 0});
    pimpl->argv = argv.toPtr<ArgvFunction>();
    pimpl->entry = entry.toPtr<void *>();
    std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    pimpl->compile_ms = elapsed.count();
}

JITModule::JITModule(JITModule &&) noexcept = default;
JITModule &JITModule::operator=(JITModule &&) noexcept = default;
JITModule::~JITModule() = default;

const std::string &JITModule::name() const {
    return pimpl->module.name();
}
const Target &JITModule::target() const {
    return pimpl->module.target();
}
JITModule::ArgvFunction JITModule::argv_function() const {
    return pimpl->argv;
}
void *JITModule::entry_address() const {
    return pimpl->entry;
}
std::string JITModule::llvm_ir() const {
    return pimpl->module.llvm_ir();
}
std::string JITModule::assembly() const {
    return pimpl->module.assembly();
}
double JITModule::compile_time_ms() const {
    return pimpl->compile_ms;
}

} // namespace kiln
