#include "driver/Pipeline.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <sstream>

#include "codegen/AOT.h"
#include "codegen/CodeGenDevice.h"
#include "codegen/JIT.h"
#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "runtime/kiln_runtime.h"
#include "schedule/Lower.h"

namespace kiln {

namespace {

/// A bounded least-recently-used cache of compiled modules.
class JITCache {
public:
    std::shared_ptr<const JITModule> get_or_compile(const std::string &key, const LoweredFunc &f,
                                                    const Target &t,
                                                    const std::string &device_source) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            auto it = index.find(key);
            if (it != index.end()) {
                stats.hits++;
                order.splice(order.begin(), order, it->second);
                return it->second->second;
            }
            stats.misses++;
        }
        auto module = std::make_shared<const JITModule>(f, t, device_source);
        std::lock_guard<std::mutex> lock(mutex);
        if (index.count(key)) return index[key]->second;
        order.emplace_front(key, module);
        index[key] = order.begin();
        while (order.size() > capacity) {
            index.erase(order.back().first);
            order.pop_back();
        }
        return module;
    }
    JITCacheStats get_stats() {
        std::lock_guard<std::mutex> lock(mutex);
        JITCacheStats s = stats;
        s.entries = order.size();
        return s;
    }
    void clear() {
        std::lock_guard<std::mutex> lock(mutex);
        order.clear();
        index.clear();
        stats = {};
    }

private:
    static constexpr size_t capacity = 256;
    using Entry = std::pair<std::string, std::shared_ptr<const JITModule>>;
    std::mutex mutex;
    std::list<Entry> order;
    std::map<std::string, std::list<Entry>::iterator> index;
    JITCacheStats stats;
};

JITCache &cache() {
    static JITCache c;
    return c;
}

std::string cache_key(const LoweredFunc &f, const Target &t, const std::string &device_source) {
    std::ostringstream s;
    s << structural_hash(f.body) << "|" << t.to_string() << "|"
      << std::hash<std::string>()(device_source);
    for (const LoweredArgument &a : f.args) {
        s << "|" << a.name << ":" << a.type << ":" << a.dimensions << (a.is_output ? "o" : "i");
    }
    return s.str();
}

kiln_type_t runtime_type(Type t) {
    kiln_type_t r;
    r.code = t.is_int()      ? kiln_type_int
             : t.is_uint()   ? kiln_type_uint
             : t.is_bfloat() ? kiln_type_bfloat
             : t.is_float()  ? kiln_type_float
                             : kiln_type_bool;
    r.bits = t.is_bool() ? 1 : t.bits;
    r.lanes = 1;
    return r;
}

void copy_back_contents(BufferContents *c);
void release_contents(BufferContents *c);

/// A buffer descriptor pointing at a BufferBase's memory and its device copy; write_back()
/// stores what the runtime changed of the device copy into the BufferBase.
struct DescribedBuffer {
    kiln_buffer_t raw{};
    std::vector<kiln_dimension_t> dims;
    BufferContents *contents;
    explicit DescribedBuffer(BufferContents *c) : contents(c) {
        for (const BufferDim &d : c->dims) {
            dims.push_back({d.min, d.extent, d.stride, 0});
        }
        raw.host = c->host;
        raw.type = runtime_type(c->type);
        raw.dimensions = int32_t(c->dims.size());
        raw.dim = dims.data();
        raw.device = c->device;
        raw.device_interface = static_cast<const kiln_device_interface_t *>(c->device_interface);
        raw.flags = c->device_flags;
    }
    explicit DescribedBuffer(const BufferBase &b) : DescribedBuffer(b.get_contents().get()) {}
    void write_back() const {
        contents->device = raw.device;
        contents->device_interface = raw.device_interface;
        contents->device_flags = raw.flags;
        if (raw.device) {
            contents->device_copy_back = copy_back_contents;
            contents->device_release = release_contents;
        }
    }
};

void copy_back_contents(BufferContents *c) {
    DescribedBuffer d(c);
    int code = kiln_buffer_copy_to_host(&d.raw);
    d.write_back();
    if (code != 0) {
        runtime_error("copying buffer '", c->name, "' back from the device failed (",
                      kiln_error_code_name(code), "): ", kiln_last_error_message());
    }
}

void release_contents(BufferContents *c) {
    DescribedBuffer d(c);
    kiln_buffer_device_free(&d.raw); // in a destructor: nothing to report to
    d.write_back();
}

const kiln_device_interface_t *interface_for(const Target &t) {
    if (!t.has_gpu()) {
        user_error("copy_to_device: the target has no GPU API; use "
                   "Target::host().with_gpu(GpuApi::OpenCL) or GpuApi::CUDA");
    }
    const kiln_device_interface_t *iface = kiln_device_interface(int(t.gpu));
    if (!iface) {
        runtime_error("no ", gpu_api_name(t.gpu), " device: ", kiln_last_error_message());
    }
    return iface;
}

/// The bytes of a scalar argument, from the constant bound to its Param.
struct ScalarSlot {
    alignas(8) unsigned char bytes[8] = {};
};

void store_scalar(const LoweredArgument &a, ScalarSlot *slot) {
    if (!a.param || !a.param->scalar_value.defined()) {
        runtime_error("param '", a.name, "' has no value; call set() before running the pipeline");
    }
    const Expr &v = a.param->scalar_value;
    Type t = a.type;
    if (t.is_float()) {
        double d = *as_const_float(v);
        if (t.is_bfloat()) {
            uint16_t bits = bfloat16_bits_of(float(d)); // d is already a bfloat16 value
            std::memcpy(slot->bytes, &bits, 2);
        } else if (t.bits == 32) {
            float f = float(d);
            std::memcpy(slot->bytes, &f, 4);
        } else {
            std::memcpy(slot->bytes, &d, 8);
        }
        return;
    }
    int64_t i = *as_const_int(v);
    if (t.is_bool()) {
        bool b = i != 0;
        std::memcpy(slot->bytes, &b, 1);
        return;
    }
    std::memcpy(slot->bytes, &i, t.bytes()); // little-endian: the low bytes
}

} // namespace

int CompiledPipeline::run(const std::vector<BufferBase> &outputs) const {
    if (!module) runtime_error("run: the pipeline is not compiled");
    std::vector<std::unique_ptr<DescribedBuffer>> buffers;
    std::vector<kiln_buffer_t *> buffer_ptrs;
    std::vector<ScalarSlot> scalars(func->args.size());
    std::vector<void *> argv;
    buffer_ptrs.reserve(func->args.size());
    size_t next_output = 0;
    for (size_t i = 0; i < func->args.size(); i++) {
        const LoweredArgument &a = func->args[i];
        if (a.kind == LoweredArgument::Scalar) {
            store_scalar(a, &scalars[i]);
            argv.push_back(scalars[i].bytes);
            continue;
        }
        BufferBase b;
        if (a.is_output) {
            if (next_output >= outputs.size()) {
                runtime_error("run: the pipeline writes ", next_output + 1,
                              " or more output buffers, but ", outputs.size(), " were given");
            }
            b = outputs[next_output++];
        } else if (a.buffer) {
            b = BufferBase(a.buffer);
        } else if (a.param) {
            b = a.param->buffer;
            if (!b.defined()) {
                runtime_error("ImageParam '", a.name,
                              "' has no buffer; call set() before running the pipeline");
            }
        }
        if (!b.defined()) runtime_error("run: buffer '", a.name, "' is undefined");
        if (b.type() != a.type) {
            runtime_error("buffer '", a.name, "' holds ", b.type(), ", but the pipeline expects ",
                          a.type);
        }
        if (b.dimensions() != a.dimensions) {
            runtime_error("buffer '", a.name, "' has ", b.dimensions(),
                          " dimensions, but the pipeline expects ", a.dimensions);
        }
        buffers.push_back(std::make_unique<DescribedBuffer>(b));
        buffer_ptrs.push_back(&buffers.back()->raw);
        argv.push_back(&buffer_ptrs.back());
    }
    if (next_output != outputs.size()) {
        runtime_error("run: the pipeline writes ", next_output, " output buffers, but ",
                      outputs.size(), " were given");
    }
    int code = module->call(argv.data());
    for (const auto &b : buffers)
        b->write_back();
    return code;
}

void CompiledPipeline::realize_into(const std::vector<BufferBase> &outputs) const {
    int code = run(outputs);
    if (code != 0) {
        runtime_error("pipeline '", func->name, "' failed (", kiln_error_code_name(code),
                      "): ", kiln_last_error_message());
    }
    // realize() hands back host data: outputs written on the device are copied back once.
    for (const BufferBase &b : outputs) {
        if (b.device_dirty()) copy_back_contents(b.get_contents().get());
    }
}

const std::string &CompiledPipeline::device_source() const {
    static const std::string none;
    return source ? *source : none;
}

const LoweredFunc &CompiledPipeline::lowered() const {
    if (!func) runtime_error("the pipeline is not compiled");
    return *func;
}
std::string CompiledPipeline::llvm_ir() const {
    return module->llvm_ir();
}
std::string CompiledPipeline::assembly() const {
    return module->assembly();
}
double CompiledPipeline::compile_time_ms() const {
    return module->compile_time_ms();
}

LoweredFunc Pipeline::lower(const std::string &name) const {
    if (outputs.empty()) user_error("a Pipeline needs at least one output Func");
    return kiln::lower(outputs, name.empty() ? outputs[0].name() : name);
}

std::string Pipeline::lowered_text(const std::string &name) const {
    return lower_to_text(outputs, name.empty() ? outputs[0].name() : name);
}

CompiledPipeline Pipeline::compile_jit(const Target &target) const {
    auto f = std::make_shared<const LoweredFunc>(lower());
    auto source = std::make_shared<const std::string>(kernel_source(*f, target));
    CompiledPipeline c;
    c.module = cache().get_or_compile(cache_key(*f, target, *source), *f, target, *source);
    c.func = f;
    c.source = source;
    return c;
}

BufferBase Pipeline::realize(const std::vector<int> &extents, const Target &target) const {
    if (outputs.size() != 1 || outputs[0].num_values() != 1) {
        user_error("realize with extents needs one single-valued output; pass output buffers "
                   "instead");
    }
    const Func &f = outputs[0];
    if (int(extents.size()) != f.dimensions()) {
        user_error("realize: '", f.name(), "' has ", f.dimensions(), " dimensions, but ",
                   extents.size(), " extents were given");
    }
    BufferBase out(f.output_type(), extents, f.name());
    realize({out}, target);
    return out;
}

void Pipeline::realize(const std::vector<BufferBase> &bufs, const Target &target) const {
    compile_jit(target).realize_into(bufs);
}

void BufferBase::copy_to_device(const Target &target) {
    const kiln_device_interface_t *iface = interface_for(target);
    DescribedBuffer d(get());
    int code = kiln_buffer_copy_to_device(&d.raw, iface);
    d.write_back();
    if (code != 0) {
        runtime_error("copy_to_device of buffer '", name(), "' failed (",
                      kiln_error_code_name(code), "): ", kiln_last_error_message());
    }
}

void BufferBase::copy_to_host() {
    if (device_dirty()) copy_back_contents(get());
}

void BufferBase::device_free() {
    if (!has_device_allocation()) return;
    DescribedBuffer d(get());
    int code = kiln_buffer_device_free(&d.raw);
    d.write_back();
    if (code != 0) {
        runtime_error("device_free of buffer '", name(), "' failed (", kiln_error_code_name(code),
                      "): ", kiln_last_error_message());
    }
}

// Ahead-of-time compilation: lower, then hand the LoweredFunc to codegen/AOT.

void Pipeline::compile_to(const OutputSet &outputs, const std::string &function_name,
                          const Target &target,
                          const std::vector<std::string> &argument_order) const {
    check_c_identifier(function_name, "function name");
    compile_lowered_to(with_argument_order(lower(function_name), argument_order), target, outputs);
}

void Pipeline::compile_to(const OutputSet &outputs, const std::string &function_name,
                          const std::vector<Target> &targets,
                          const std::vector<std::string> &argument_order) const {
    compile_lowered_to(with_argument_order(lower(function_name), argument_order), targets, outputs);
}

void Pipeline::compile_to_static_library(const std::string &dir, const std::string &function_name,
                                         const Target &target,
                                         const std::vector<std::string> &argument_order) const {
    compile_to(OutputSet::in_directory(dir, function_name,
                                       {OutputKind::StaticLibrary, OutputKind::CHeader}),
               function_name, target, argument_order);
}

void Pipeline::compile_to_file(const std::string &dir, const std::string &function_name,
                               const Target &target,
                               const std::vector<std::string> &argument_order) const {
    compile_to(
        OutputSet::in_directory(dir, function_name, {OutputKind::Object, OutputKind::CHeader}),
        function_name, target, argument_order);
}

JITCacheStats jit_cache_stats() {
    return cache().get_stats();
}
void clear_jit_cache() {
    cache().clear();
}

BufferBase Func::realize(const std::vector<int> &extents) const {
    return Pipeline(*this).realize(extents);
}

} // namespace kiln
