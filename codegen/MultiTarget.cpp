#include "codegen/MultiTarget.h"

#include <algorithm>
#include <functional>

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

namespace {

/// Builds `choose` (the variant's index, or a negative error code returned as is) at the start
/// of the entry point; `output` is the output buffer's pointer.
using ChoiceBuilder =
    std::function<llvm::Value *(llvm::IRBuilder<> &, llvm::Module &, llvm::Value *output)>;

/// A dispatcher module for f compiled for `t`: `int f.name(args)` and `int f.name_argv(void **)`,
/// each forwarding its arguments unchanged to variant_symbols[choice] (or its _argv form).
LLVMModule dispatcher_module(const LoweredFunc &f, const Target &t,
                             const std::vector<std::string> &variant_names,
                             const std::vector<std::string> &variant_symbols,
                             const std::function<ChoiceBuilder(llvm::Module &)> &prepare) {
    auto m = std::make_unique<LLVMModule::Impl>();
    m->name = f.name;
    m->target = t;
    m->target_machine = make_target_machine(t);
    m->context = std::make_unique<llvm::LLVMContext>();
    m->module = std::make_unique<llvm::Module>(f.name + "_dispatch", *m->context);
    m->module->setTargetTriple(t.triple);
    m->module->setDataLayout(m->target_machine->createDataLayout());
    llvm::LLVMContext &context = *m->context;
    llvm::Module &module = *m->module;
    llvm::IRBuilder<> builder(context);
    llvm::Type *i32 = builder.getInt32Ty();
    llvm::PointerType *ptr = builder.getPtrTy();
    ChoiceBuilder choose = prepare(module);
    // The output buffer is the last argument (lowering lists outputs last).
    int output_index = -1;
    for (size_t i = 0; i < f.args.size(); i++) {
        if (f.args[i].is_output && f.args[i].kind == LoweredArgument::Buffer) output_index = int(i);
    }

    auto emit = [&](const std::string &name, llvm::FunctionType *type, bool argv) {
        auto *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
        fn->addFnAttr(llvm::Attribute::NoUnwind);
        fn->addFnAttr("target-cpu", t.cpu);
        if (!t.features.empty()) fn->addFnAttr("target-features", t.features);
        builder.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", fn));
        llvm::Value *output = llvm::ConstantPointerNull::get(ptr);
        if (output_index >= 0 && !argv) output = fn->getArg(unsigned(output_index));
        if (output_index >= 0 && argv) {
            llvm::Value *slot =
                builder.CreateLoad(ptr, builder.CreateConstInBoundsGEP1_32(ptr, fn->getArg(0),
                                                                           unsigned(output_index)));
            output = builder.CreateLoad(ptr, slot, "output");
        }
        llvm::Value *choice = choose(builder, module, output);
        auto *fail = llvm::BasicBlock::Create(context, "fail", fn);
        llvm::SwitchInst *sw = builder.CreateSwitch(choice, fail, unsigned(variant_names.size()));
        std::vector<llvm::Value *> args;
        for (llvm::Argument &a : fn->args())
            args.push_back(&a);
        for (size_t i = 0; i < variant_names.size(); i++) {
            auto *block = llvm::BasicBlock::Create(context, variant_names[i], fn);
            sw->addCase(builder.getInt32(int(i)), block);
            builder.SetInsertPoint(block);
            llvm::FunctionCallee variant =
                module.getOrInsertFunction(variant_symbols[i] + (argv ? "_argv" : ""), type);
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
    emit(f.name, llvm::FunctionType::get(i32, params, false), false);
    emit(f.name + "_argv", llvm::FunctionType::get(i32, {ptr}, false), true);

    std::string problems;
    llvm::raw_string_ostream os(problems);
    internal_assert(!llvm::verifyModule(module, &os), "dispatcher of '", f.name,
                    "' is not valid LLVM IR: ", os.str());
    return LLVMModule(std::move(m));
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
    return dispatcher_module(
        f, portable, variant_names, variant_symbols, [&](llvm::Module &module) -> ChoiceBuilder {
            llvm::LLVMContext &context = module.getContext();
            llvm::IRBuilder<> builder(context);
            llvm::Type *i32 = builder.getInt32Ty(), *i64 = builder.getInt64Ty();
            llvm::PointerType *ptr = builder.getPtrTy();
            // The variant table the runtime reads: {name, required features} per variant.
            llvm::StructType *variant_type = llvm::StructType::get(context, {ptr, i64});
            std::vector<llvm::Constant *> rows;
            for (size_t i = 0; i < variant_names.size(); i++) {
                llvm::Constant *name = builder.CreateGlobalString(
                    variant_names[i], f.name + ".variant_name", 0, &module);
                rows.push_back(llvm::ConstantStruct::get(
                    variant_type, {name, llvm::ConstantInt::get(i64, required_features[i])}));
            }
            auto *table_type = llvm::ArrayType::get(variant_type, rows.size());
            auto *table = new llvm::GlobalVariable(
                module, table_type, true, llvm::GlobalValue::PrivateLinkage,
                llvm::ConstantArray::get(table_type, rows), f.name + ".variants");
            llvm::Constant *kernel_name =
                builder.CreateGlobalString(f.name, f.name + ".kernel_name", 0, &module);
            llvm::FunctionCallee select = module.getOrInsertFunction(
                "kiln_select_target_variant", llvm::FunctionType::get(i32, {ptr, i32, ptr}, false));
            int count = int(rows.size());
            return [=](llvm::IRBuilder<> &b, llvm::Module &, llvm::Value *) -> llvm::Value * {
                return b.CreateCall(select, {kernel_name, b.getInt32(count), table}, "variant");
            };
        });
}

LLVMModule compile_shape_dispatcher(const LoweredFunc &f, const Target &t,
                                    const std::vector<std::string> &variant_names,
                                    const std::vector<std::string> &variant_symbols,
                                    const std::vector<std::vector<int64_t>> &shapes) {
    internal_assert(variant_names.size() == variant_symbols.size() &&
                        shapes.size() + 1 == variant_names.size(),
                    "shape dispatch: ", variant_names.size(), " names, ", variant_symbols.size(),
                    " symbols and ", shapes.size(), " shapes");
    size_t dims = shapes.empty() ? 0 : shapes[0].size();
    return dispatcher_module(
        f, t, variant_names, variant_symbols, [&](llvm::Module &module) -> ChoiceBuilder {
            llvm::LLVMContext &context = module.getContext();
            llvm::IRBuilder<> builder(context);
            llvm::Type *i32 = builder.getInt32Ty(), *i64 = builder.getInt64Ty();
            llvm::PointerType *ptr = builder.getPtrTy();
            std::vector<llvm::Constant *> extents, names;
            for (const std::vector<int64_t> &shape : shapes) {
                internal_assert(shape.size() == dims, "shape dispatch: shapes of ", shape.size(),
                                " and ", dims, " dimensions");
                for (int64_t e : shape)
                    extents.push_back(llvm::ConstantInt::get(i64, e));
            }
            extents.push_back(llvm::ConstantInt::get(i64, 0)); // never empty
            for (const std::string &n : variant_names)
                names.push_back(
                    builder.CreateGlobalString(n, f.name + ".variant_name", 0, &module));
            auto *extents_type = llvm::ArrayType::get(i64, extents.size());
            auto *extents_table = new llvm::GlobalVariable(
                module, extents_type, true, llvm::GlobalValue::PrivateLinkage,
                llvm::ConstantArray::get(extents_type, extents), f.name + ".shapes");
            auto *names_type = llvm::ArrayType::get(ptr, names.size());
            auto *names_table = new llvm::GlobalVariable(
                module, names_type, true, llvm::GlobalValue::PrivateLinkage,
                llvm::ConstantArray::get(names_type, names), f.name + ".variant_names");
            llvm::FunctionCallee select = module.getOrInsertFunction(
                "kiln_select_shape_variant",
                llvm::FunctionType::get(i32, {ptr, i32, i32, ptr, ptr}, false));
            int count = int(names.size()), dimensions = int(dims);
            return [=](llvm::IRBuilder<> &b, llvm::Module &, llvm::Value *output) -> llvm::Value * {
                return b.CreateCall(
                    select,
                    {output, b.getInt32(count), b.getInt32(dimensions), extents_table, names_table},
                    "variant");
            };
        });
}

} // namespace kiln
