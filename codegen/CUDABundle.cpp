#include "codegen/CUDABundle.h"

#include <cstring>
#include <sstream>

#include "codegen/NVRTC.h"
#include "lang/Error.h"
#include "runtime/kiln_runtime.h"

namespace kiln {

namespace {

constexpr size_t magic_size = 8;
constexpr size_t header_size = magic_size + 8;

template <typename T>
void put(std::string &out, size_t at, T value) {
    std::memcpy(&out[at], &value, sizeof(T));
}

template <typename T>
T get(const std::string &in, size_t at) {
    T value;
    std::memcpy(&value, in.data() + at, sizeof(T));
    return value;
}

std::string pack(const std::vector<CUDAImage> &images) {
    static_assert(sizeof(kiln_cuda_bundle_entry_t) == 24, "bundle entries are 24 bytes");
    size_t offset = header_size + images.size() * sizeof(kiln_cuda_bundle_entry_t);
    std::string out(offset, '\0');
    std::memcpy(&out[0], KILN_CUDA_BUNDLE_MAGIC, magic_size);
    put<uint32_t>(out, magic_size, uint32_t(images.size()));
    put<uint32_t>(out, magic_size + 4, 0);
    for (size_t i = 0; i < images.size(); i++) {
        offset = (out.size() + 7) / 8 * 8; // images start 8-aligned
        out.resize(offset, '\0');
        kiln_cuda_bundle_entry_t e{uint32_t(images[i].kind), uint32_t(images[i].arch), offset,
                                   images[i].bytes.size()};
        std::memcpy(&out[header_size + i * sizeof(e)], &e, sizeof(e));
        out += images[i].bytes;
    }
    return out;
}

const char *kind_name(CUDAImage::Kind k) {
    switch (k) {
    case CUDAImage::Kind::Source:
        return "CUDA C source";
    case CUDAImage::Kind::PTX:
        return "PTX";
    case CUDAImage::Kind::Cubin:
        return "cubin";
    }
    return "?";
}

} // namespace

std::string make_cuda_bundle(const std::string &source, const std::vector<int> &archs) {
    std::vector<CUDAImage> images;
    for (int arch : archs) {
        std::string sm = "sm_" + std::to_string(arch);
        images.push_back({CUDAImage::Kind::PTX, arch, compile_cuda_to_ptx(source, sm)});
        // NVRTC makes cubins for the architectures its ptxas knows; a newer one gets PTX only.
        try {
            std::vector<char> cubin = compile_cuda_to_cubin(source, sm);
            images.push_back(
                {CUDAImage::Kind::Cubin, arch, std::string(cubin.begin(), cubin.end())});
        } catch (const CompileError &) {
        }
    }
    images.push_back({CUDAImage::Kind::Source, 0, source});
    return pack(images);
}

std::vector<CUDAImage> read_cuda_bundle(const std::string &bundle) {
    if (bundle.size() < header_size || bundle.compare(0, magic_size, KILN_CUDA_BUNDLE_MAGIC) != 0) {
        user_error("not a kiln CUDA bundle: it does not start with '", KILN_CUDA_BUNDLE_MAGIC, "'");
    }
    uint32_t count = get<uint32_t>(bundle, magic_size);
    if (count > (bundle.size() - header_size) / sizeof(kiln_cuda_bundle_entry_t)) {
        user_error("malformed kiln CUDA bundle: ", count, " entries do not fit in ", bundle.size(),
                   " bytes");
    }
    std::vector<CUDAImage> images;
    for (uint32_t i = 0; i < count; i++) {
        auto e = get<kiln_cuda_bundle_entry_t>(bundle,
                                               header_size + i * sizeof(kiln_cuda_bundle_entry_t));
        if (e.kind > uint32_t(CUDAImage::Kind::Cubin) || e.offset > bundle.size() ||
            e.size > bundle.size() - e.offset) {
            user_error("malformed kiln CUDA bundle: entry ", i, " (kind ", e.kind, ", offset ",
                       e.offset, ", size ", e.size, ") lies outside its ", bundle.size(), " bytes");
        }
        images.push_back({CUDAImage::Kind(e.kind), int(e.arch),
                          bundle.substr(size_t(e.offset), size_t(e.size))});
    }
    return images;
}

std::string describe_cuda_bundle(const std::string &bundle) {
    std::ostringstream out;
    for (const CUDAImage &image : read_cuda_bundle(bundle)) {
        if (image.kind != CUDAImage::Kind::Source) out << "sm_" << image.arch << " ";
        out << kind_name(image.kind) << " (" << image.bytes.size() << " bytes)\n";
    }
    return out.str();
}

} // namespace kiln
