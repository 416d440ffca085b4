#include "codegen/MultiTarget.h"

#include <algorithm>

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/LLVMModuleImpl.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"

namespace kiln {

std::vector<std::string> target_variant_names(const std::vector<Target> &targets) {
    std::vector<std::string> names;
    for (size_t i = 0; i < targets.size(); i++) {
        std::string name = targets[i].cpu.empty() ? "generic" : targets[i].cpu;
        if (std::find(names.begin(), names.end(), name) != names.end())
            name += "-" + std::to_string(i);
        names.push_back(name);
    }
    return names;
}

uint64_t required_cpu_features(const Target &t) {
    static const char *const names[] = {KILN_CPU_FEATURE_NAMES};
    uint64_t mask = 0;
    for (int i = 0; i < KILN_CPU_FEATURE_COUNT; i++) {
        if (t.has_feature(names[i])) mask |= uint64_t(1) << i;
    }
    return mask;
}

namespace {

// The LLVM type of an argument, as CodeGenLLVM declares the typed entry point: a pointer for a
// buffer, the scalar's own type (i1 for bool) otherwise.
llvm::Type *argument_type(llvm::LLVMContext &context, const LoweredArgument &a) {
    if (a.kind == LoweredArgument::Buffer) return llvm::PointerType::get(context, 0);
    if (a.type.is_bool()) return llvm::Type::getInt1Ty(context);
    if (a.type.is_float()) {
        return a.type.bits == 64 ? llvm::Type::getDoubleTy(context)
                                 : llvm::Type::getFloatTy(context);
    }
    return llvm::Type::getIntNTy(context, a.type.bits);
}

} // namespace

LLVMModule compile_dispatcher(const LoweredFunc &f, const Target &portable,
                              const std::vector<std::string> &variant_names,
                              const std::vector<std::string> &variant_symbols,
                              const std::vector<uint64_t> &required_features) {
    internal_assert(variant_names.size() == variant_symbols.size() &&
                        variant_names.size() == required_features.size() && !variant_names.empty(),
                    "multi-target: ", variant_names.size(), " names, ", variant_symbols.size(),
                    " symbols and ", required_features.size(), " feature masks");
    auto m = std::make_unique<LLVMModule::Impl>();
    m->name = f.name;
    m->target = portable;
    m->target_machine = make_target_machine(portable);
    m->context = std::make_unique<llvm::LLVMContext>();
    m->module = std::make_unique<llvm::Module>(f.name + "_dispatch", *m->context);
    m->module->setTargetTriple(portable.triple);
    m->module->setDataLayout(m->target_machine->createDataLayout());
    llvm::LLVMContext &context = *m->context;
    llvm::Module &module = *m->module;
    llvm::IRBuilder<> builder(context);
    llvm::Type *i32 = builder.getInt32Ty(), *i64 = builder.getInt64Ty();
    llvm::PointerType *ptr = builder.getPtrTy();

    // The variant table the runtime reads: {name, required features} per variant.
    llvm::StructType *variant_type = llvm::StructType::get(context, {ptr, i64});
    std::vector<llvm::Constant *> rows;
    for (size_t i = 0; i < variant_names.size(); i++) {
        llvm::Constant *name =
            builder.CreateGlobalString(variant_names[i], f.name + ".variant_name", 0, &module);
        rows.push_back(llvm::ConstantStruct::get(
            variant_type, {name, llvm::ConstantInt::get(i64, required_features[i])}));
    }
    auto *table_type = llvm::ArrayType::get(variant_type, rows.size());
    auto *table =
        new llvm::GlobalVariable(module, table_type, true, llvm::GlobalValue::PrivateLinkage,
                                 llvm::ConstantArray::get(table_type, rows), f.name + ".variants");
    llvm::Constant *kernel_name =
        builder.CreateGlobalString(f.name, f.name + ".kernel_name", 0, &module);
    llvm::FunctionCallee select = module.getOrInsertFunction(
        "kiln_select_target_variant", llvm::FunctionType::get(i32, {ptr, i32, ptr}, false));

    auto emit = [&](const std::string &name, llvm::FunctionType *type, const std::string &suffix) {
        auto *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
        fn->addFnAttr(llvm::Attribute::NoUnwind);
        fn->addFnAttr("target-cpu", portable.cpu);
        if (!portable.features.empty()) fn->addFnAttr("target-features", portable.features);
        builder.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", fn));
        llvm::Value *choice = builder.CreateCall(
            select, {kernel_name, builder.getInt32(int(rows.size())), table}, "variant");
        auto *fail = llvm::BasicBlock::Create(context, "fail", fn);
        llvm::SwitchInst *sw = builder.CreateSwitch(choice, fail, unsigned(rows.size()));
        std::vector<llvm::Value *> args;
        for (llvm::Argument &a : fn->args())
            args.push_back(&a);
        for (size_t i = 0; i < rows.size(); i++) {
            auto *block = llvm::BasicBlock::Create(context, variant_names[i], fn);
            sw->addCase(builder.getInt32(int(i)), block);
            builder.SetInsertPoint(block);
            llvm::FunctionCallee variant =
                module.getOrInsertFunction(variant_symbols[i] + suffix, type);
            llvm::CallInst *call = builder.CreateCall(variant, args);
            call->setTailCall();
            builder.CreateRet(call);
        }
        builder.SetInsertPoint(fail);
        builder.CreateRet(choice);
    };
    std::vector<llvm::Type *> params;
    for (const LoweredArgument &a : f.args)
        params.push_back(argument_type(context, a));
    emit(f.name, llvm::FunctionType::get(i32, params, false), "");
    emit(f.name + "_argv", llvm::FunctionType::get(i32, {ptr}, false), "_argv");

    std::string problems;
    llvm::raw_string_ostream os(problems);
    internal_assert(!llvm::verifyModule(module, &os), "multi-target dispatcher of '", f.name,
                    "' is not valid LLVM IR: ", os.str());
    return LLVMModule(std::move(m));
}

} // namespace kiln
