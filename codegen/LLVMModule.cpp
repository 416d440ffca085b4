#include "codegen/LLVMModuleImpl.h"

#include <time.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "lang/Error.h"

namespace kiln {

void initialize_llvm() {
    static std::once_flag once;
    std::call_once(once, [] {
        // All targets, not only the host's: ahead-of-time compilation may cross-compile.
        llvm::InitializeAllTargetInfos();
        llvm::InitializeAllTargets();
        llvm::InitializeAllTargetMCs();
        llvm::InitializeAllAsmPrinters();
        llvm::InitializeAllAsmParsers();
    });
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target &t) {
    initialize_llvm();
    std::string error;
    const llvm::Target *target = llvm::TargetRegistry::lookupTarget(t.triple, error);
    if (!target) user_error("target '", t.triple, "' is not supported by LLVM: ", error);
    llvm::TargetOptions options;
    // Standard fusion only fuses llvm.fmuladd (kiln's own math); user arithmetic is contracted
    // only under fast-math, as the IR semantics say.
    options.AllowFPOpFusion = t.fast_math ? llvm::FPOpFusion::Fast : llvm::FPOpFusion::Standard;
    options.UnsafeFPMath = t.fast_math;
    options.NoInfsFPMath = t.fast_math;
    options.NoNaNsFPMath = t.fast_math;
    std::unique_ptr<llvm::TargetMachine> tm(
        target->createTargetMachine(t.triple, t.cpu, t.features, options, llvm::Reloc::PIC_,
                                    std::nullopt, llvm::CodeGenOptLevel::Aggressive));
    if (!tm) user_error("LLVM cannot create a target machine for '", t.to_string(), "'");
    return tm;
}

namespace {
thread_local double optimize_cpu_ms = 0, optimize_wall_ms = 0;

const char *const optimization_pipeline =
    "function(sroa,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-mssa(loop-rotate,licm<allowspeculation>),gvn,instcombine<no-verify-fixpoint>,simplifycfg,"
    "dse,adce),globaldce";

double thread_cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

/// Adds the CPU and wall time of its lifetime to the optimizer's totals.
class OptimizeClock {
public:
    OptimizeClock() : cpu(thread_cpu_ms()), wall(std::chrono::steady_clock::now()) {}
    ~OptimizeClock() {
        optimize_cpu_ms += thread_cpu_ms() - cpu;
        optimize_wall_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall)
                .count();
    }

private:
    double cpu;
    std::chrono::steady_clock::time_point wall;
};
} // namespace

double optimize_cpu_ms_total() {
    return optimize_cpu_ms;
}
double optimize_wall_ms_total() {
    return optimize_wall_ms;
}

void optimize_module(llvm::Module &module, llvm::TargetMachine &target_machine) {
    OptimizeClock clock;
    llvm::LoopAnalysisManager loop_analyses;
    llvm::FunctionAnalysisManager function_analyses;
    llvm::CGSCCAnalysisManager cgscc_analyses;
    llvm::ModuleAnalysisManager module_analyses;
    // kiln vectorizes explicitly, as the schedule says: no loop or SLP auto-vectorizer.
    llvm::PipelineTuningOptions tuning;
    tuning.LoopVectorization = false;
    tuning.SLPVectorization = false;
    llvm::PassBuilder passes(&target_machine, tuning);
    passes.registerModuleAnalyses(module_analyses);
    passes.registerCGSCCAnalyses(cgscc_analyses);
    passes.registerFunctionAnalyses(function_analyses);
    passes.registerLoopAnalyses(loop_analyses);
    passes.crossRegisterProxies(loop_analyses, function_analyses, cgscc_analyses, module_analyses);
    // By default not the O3 pipeline: kiln's IR is already simplified, vectorized, unrolled and
    // CSE'd by lowering, and nothing needs inlining (parallel loop bodies are called through the
    // runtime), so most of O3's cost (the inliner and IPO, loop unswitching, indvars, LLVM's own
    // unrolling, repeated instcombine) buys little. This keeps what kiln's IR needs: closure
    // allocas promoted (sroa), redundant loads and address arithmetic shared (early-cse, gvn),
    // loop-invariant loads of buffer fields hoisted out of rotated loops (licm), peepholes and
    // dead code (instcombine, simplifycfg, dse, adce; globaldce drops unused runtime
    // declarations). bench/compile_time.cpp: the optimizer takes 2.6 ms instead of 17 ms for
    // blur, 7.6 instead of 33 for matmul. LLVM's runtime unrolling, which O3 applies on its own,
    // made blur's code about 12% faster at twice the machine-code time; schedules ask for
    // unrolling explicitly instead.
    // KILN_LLVM_PIPELINE=O3 restores the full O3 pipeline; any other value is read as an LLVM
    // pass pipeline (opt -passes syntax).
    llvm::ModulePassManager pipeline;
    const char *env = std::getenv("KILN_LLVM_PIPELINE");
    std::string chosen = env ? env : "";
    if (chosen == "O3") {
        pipeline = passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    } else {
        llvm::Error error =
            passes.parsePassPipeline(pipeline, chosen.empty() ? optimization_pipeline : chosen);
        if (error) {
            std::string why = llvm::toString(std::move(error));
            if (chosen.empty()) internal_error("cannot parse kiln's optimization pipeline: ", why);
            user_error("KILN_LLVM_PIPELINE='", chosen, "' is not an LLVM pass pipeline (", why,
                       "); use O3, a pipeline in opt -passes syntax, or unset it");
        }
    }
    pipeline.run(module, module_analyses);
}

std::string emit_machine_code(const LLVMModule::Impl &m, llvm::CodeGenFileType file_type) {
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*m.module);
    llvm::SmallString<0> buffer;
    llvm::raw_svector_ostream out(buffer);
    llvm::legacy::PassManager passes;
    bool unsupported = m.target_machine->addPassesToEmitFile(passes, out, nullptr, file_type);
    internal_assert(!unsupported, "LLVM cannot emit this file type for ", m.target.triple);
    passes.run(*copy);
    return std::string(buffer.begin(), buffer.end());
}

LLVMModule::LLVMModule(std::unique_ptr<Impl> impl) : pimpl(std::move(impl)) {}
LLVMModule::LLVMModule(LLVMModule &&) noexcept = default;
LLVMModule &LLVMModule::operator=(LLVMModule &&) noexcept = default;
LLVMModule::~LLVMModule() = default;

const std::string &LLVMModule::name() const {
    return pimpl->name;
}
const Target &LLVMModule::target() const {
    return pimpl->target;
}

std::string LLVMModule::llvm_ir() const {
    std::string text;
    llvm::raw_string_ostream out(text);
    pimpl->module->print(out, nullptr);
    out.flush();
    return text;
}

std::string LLVMModule::assembly() const {
    return emit_machine_code(*pimpl, llvm::CodeGenFileType::AssemblyFile);
}

std::string LLVMModule::object_code() const {
    return emit_machine_code(*pimpl, llvm::CodeGenFileType::ObjectFile);
}

namespace {
void write_file(const std::string &path, const std::string &contents, const char *what) {
    std::ofstream out(path, std::ios::binary);
    out.write(contents.data(), std::streamsize(contents.size()));
    out.close();
    if (!out) runtime_error("cannot write ", what, " to '", path, "'");
}
} // namespace

void LLVMModule::write_llvm_ir(const std::string &path) const {
    write_file(path, llvm_ir(), "LLVM IR");
}

void LLVMModule::write_assembly(const std::string &path) const {
    write_file(path, assembly(), "assembly");
}

void LLVMModule::write_object(const std::string &path) const {
    write_file(path, object_code(), "an object file");
}

} // namespace kiln
