#include "codegen/ObjectEmitter.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include <llvm/Object/ArchiveWriter.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include "codegen/CodeGenLLVM.h"
#include "lang/Error.h"

namespace kiln {

void write_output_file(const std::string &path, const std::string &bytes, const char *what) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) {
        runtime_error("cannot write ", what, " to '", path, "': ", std::strerror(errno),
                      "; check that the directory exists and is writable");
    }
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.close();
    if (!out) runtime_error("cannot write ", what, " to '", path, "' (disk full?)");
}

std::string make_static_library(const std::string &object_code, const std::string &member_name) {
    return make_static_library({{member_name, object_code}});
}

std::string make_static_library(const std::vector<std::pair<std::string, std::string>> &objects) {
    std::vector<llvm::NewArchiveMember> members;
    for (const auto &[name, object] : objects) {
        llvm::MemoryBufferRef ref(llvm::StringRef(object.data(), object.size()), name);
        members.emplace_back(ref);
    }
    auto archive = llvm::writeArchiveToBuffer(members, llvm::SymtabWritingMode::NormalSymtab,
                                              llvm::object::Archive::K_GNU,
                                              /*Deterministic=*/true, /*Thin=*/false);
    if (!archive) {
        std::string message = llvm::toString(archive.takeError());
        internal_error("cannot make a static library of '",
                       objects.empty() ? std::string("nothing") : objects[0].first, "': ", message);
    }
    return std::string((*archive)->getBufferStart(), (*archive)->getBufferSize());
}

void compile_to_object(const LoweredFunc &f, const Target &t, const std::string &path) {
    compile_to_llvm_module(f, t).write_object(path);
}

void compile_to_static_library(const LoweredFunc &f, const Target &t, const std::string &path) {
    std::string object = compile_to_llvm_module(f, t).object_code();
    write_output_file(path, make_static_library(object, f.name + ".o"), "a static library");
}

void compile_to_assembly(const LoweredFunc &f, const Target &t, const std::string &path) {
    compile_to_llvm_module(f, t).write_assembly(path);
}

void compile_to_llvm_ir(const LoweredFunc &f, const Target &t, const std::string &path) {
    compile_to_llvm_module(f, t).write_llvm_ir(path);
}

} // namespace kiln
