#include "runtime/kiln_dlpack.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// A float tensor of shape {2, 3, 4} (outermost first) over real memory.
struct Tensor {
    std::vector<float> data = std::vector<float>(64);
    int64_t shape[3] = {2, 3, 4};
    DLTensor tensor{};
    Tensor() {
        tensor.data = data.data();
        tensor.device = {kDLCPU, 0};
        tensor.ndim = 3;
        tensor.dtype = {kDLFloat, 32, 1};
        tensor.shape = shape;
    }
};

// The address of element (i0, i1, i2) (DLPack axis order) seen through each descriptor.
const uint8_t *dlpack_address(const DLTensor &t, const int64_t *index) {
    const uint8_t *p = static_cast<const uint8_t *>(t.data) + t.byte_offset;
    for (int axis = 0; axis < t.ndim; axis++)
        p += index[axis] * t.strides[axis] * 4;
    return p;
}

// A device handle for conversions that never dereference it.
void *fake_handle(uintptr_t value) {
    return reinterpret_cast<void *>(value); // NOLINT(performance-no-int-to-ptr)
}

const uint8_t *kiln_address(const kiln_buffer_t &b, const int64_t *index) {
    const uint8_t *p = b.host;
    for (int d = 0; d < b.dimensions; d++) {
        p += (index[b.dimensions - 1 - d] - b.dim[d].min) * b.dim[d].stride * 4;
    }
    return p;
}

} // namespace

TEST(DLPack, ACompactTensorBecomesDimsInnermostFirst) {
    Tensor t;
    kiln_buffer_t b;
    kiln_dimension_t dims[4];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 4), kiln_success);
    ASSERT_EQ(b.dimensions, 3);
    EXPECT_EQ(b.dim, dims);
    EXPECT_EQ(b.dim[0].extent, 4);
    EXPECT_EQ(b.dim[0].stride, 1);
    EXPECT_EQ(b.dim[1].extent, 3);
    EXPECT_EQ(b.dim[1].stride, 4);
    EXPECT_EQ(b.dim[2].extent, 2);
    EXPECT_EQ(b.dim[2].stride, 12);
    for (int d = 0; d < 3; d++)
        EXPECT_EQ(b.dim[d].min, 0);
    EXPECT_EQ(b.host, reinterpret_cast<uint8_t *>(t.data.data()));
    EXPECT_EQ(b.type.code, kiln_type_float);
    EXPECT_EQ(b.type.bits, 32);
    EXPECT_EQ(b.type.lanes, 1);
    EXPECT_EQ(b.device, 0u);
    EXPECT_EQ(b.device_interface, nullptr);
    EXPECT_EQ(kiln_buffer_size_in_bytes(&b), 24u * 4u);
}

TEST(DLPack, ExplicitStridesAreKeptInElements) {
    Tensor t;
    int64_t strides[3] = {1, 2, 6}; // a transposed layout
    t.tensor.strides = strides;
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    EXPECT_EQ(b.dim[0].stride, 6);
    EXPECT_EQ(b.dim[1].stride, 2);
    EXPECT_EQ(b.dim[2].stride, 1);
}

TEST(DLPack, ByteOffsetIsAddedToTheHostPointer) {
    Tensor t;
    t.tensor.byte_offset = 16;
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    EXPECT_EQ(b.host, reinterpret_cast<uint8_t *>(t.data.data()) + 16);
}

TEST(DLPack, NegativeStridesAreKept) {
    Tensor t;
    int64_t strides[3] = {12, 4, -1};
    t.tensor.strides = strides;
    t.tensor.byte_offset = 12; // element (0, 0, 0) is the last of its row
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    EXPECT_EQ(b.dim[0].stride, -1);
    EXPECT_EQ(kiln_buffer_size_in_bytes(&b), 24u * 4u);
}

TEST(DLPack, ATensorRoundTripKeepsTheAddressOfEveryElement) {
    Tensor t;
    int64_t strides[3] = {-16, 1, 3}; // padded, transposed and reversed
    t.tensor.strides = strides;
    t.tensor.byte_offset = 64;
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    DLTensor back;
    int64_t shape_back[3], strides_back[3];
    ASSERT_EQ(kiln_buffer_to_dltensor(&b, &back, shape_back, strides_back, 3), kiln_success);
    EXPECT_EQ(back.ndim, 3);
    EXPECT_EQ(back.device.device_type, kDLCPU);
    EXPECT_EQ(back.dtype.code, kDLFloat);
    for (int axis = 0; axis < 3; axis++) {
        EXPECT_EQ(back.shape[axis], t.shape[axis]);
        EXPECT_EQ(back.strides[axis], strides[axis]);
    }
    int64_t index[3];
    for (index[0] = 0; index[0] < 2; index[0]++) {
        for (index[1] = 0; index[1] < 3; index[1]++) {
            for (index[2] = 0; index[2] < 4; index[2]++) {
                EXPECT_EQ(kiln_address(b, index), dlpack_address(t.tensor, index));
                EXPECT_EQ(dlpack_address(back, index), dlpack_address(t.tensor, index));
            }
        }
    }
}

TEST(DLPack, ABufferBecomesATensorWithAxesOutermostFirstAndNoMins) {
    float data[50];
    kiln_dimension_t dims[2] = {{5, 5, 1, 0}, {-2, 10, 5, 0}};
    kiln_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(data);
    b.type = {kiln_type_int, 32, 1};
    b.dimensions = 2;
    b.dim = dims;
    DLTensor t;
    int64_t shape[2], strides[2];
    ASSERT_EQ(kiln_buffer_to_dltensor(&b, &t, shape, strides, 2), kiln_success);
    EXPECT_EQ(t.data, data);
    EXPECT_EQ(t.byte_offset, 0u);
    EXPECT_EQ(t.shape, shape);
    EXPECT_EQ(t.strides, strides);
    EXPECT_EQ(shape[0], 10);
    EXPECT_EQ(shape[1], 5);
    EXPECT_EQ(strides[0], 5);
    EXPECT_EQ(strides[1], 1);
    EXPECT_EQ(t.dtype.code, kDLInt);
    EXPECT_EQ(t.dtype.bits, 32);
    EXPECT_EQ(t.dtype.lanes, 1);
}

TEST(DLPack, TypesMapToTheirDLPackCodesAndBack) {
    struct Case {
        kiln_type_t kiln;
        DLDataType dlpack;
    };
    const Case cases[] = {
        {{kiln_type_int, 8, 1}, {kDLInt, 8, 1}},
        {{kiln_type_uint, 16, 1}, {kDLUInt, 16, 1}},
        {{kiln_type_float, 64, 1}, {kDLFloat, 64, 1}},
        {{kiln_type_float, 32, 4}, {kDLFloat, 32, 4}},
        {{kiln_type_bool, 1, 1}, {6, 8, 1}},
    };
    uint8_t data[16];
    for (const Case &c : cases) {
        kiln_dimension_t dim = {0, 2, 1, 0};
        kiln_buffer_t b{};
        b.host = data;
        b.type = c.kiln;
        b.dimensions = 1;
        b.dim = &dim;
        DLTensor t;
        int64_t shape[1], strides[1];
        ASSERT_EQ(kiln_buffer_to_dltensor(&b, &t, shape, strides, 1), kiln_success);
        EXPECT_EQ(t.dtype.code, c.dlpack.code);
        EXPECT_EQ(t.dtype.bits, c.dlpack.bits);
        EXPECT_EQ(t.dtype.lanes, c.dlpack.lanes);
        kiln_buffer_t back;
        kiln_dimension_t back_dim;
        ASSERT_EQ(kiln_buffer_from_dltensor(&t, &back, &back_dim, 1), kiln_success);
        EXPECT_EQ(back.type.code, c.kiln.code);
        EXPECT_EQ(back.type.bits, c.kiln.bits);
        EXPECT_EQ(back.type.lanes, c.kiln.lanes);
    }
}

TEST(DLPack, AZeroDimensionalTensorIsAScalarBuffer) {
    float value = 1.5f;
    DLTensor t{};
    t.data = &value;
    t.device = {kDLCPU, 0};
    t.dtype = {kDLFloat, 32, 1};
    kiln_buffer_t b;
    ASSERT_EQ(kiln_buffer_from_dltensor(&t, &b, nullptr, 0), kiln_success);
    EXPECT_EQ(b.dimensions, 0);
    EXPECT_EQ(b.dim, nullptr);
    EXPECT_EQ(kiln_buffer_size_in_bytes(&b), 4u);
}

TEST(DLPack, OtherDeviceTensorsAreRejectedNamingTheDevice) {
    Tensor t;
    t.tensor.device = {kDLVulkan, 0};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_from_dltensor: only CPU, CUDA and OpenCL "
                                            "tensors are supported, got device type 7 (Vulkan)");
}

TEST(DLPack, AnOpenCLTensorBecomesADeviceBufferOnTheOpenCLInterface) {
    Tensor t;
    void *cl_mem = fake_handle(0x5000); // opaque: never dereferenced
    t.tensor.data = cl_mem;
    t.tensor.device = {kDLOpenCL, 0};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    EXPECT_EQ(b.device, 0x5000u);
    EXPECT_EQ(b.device_interface, kiln_opencl_device_interface());
    EXPECT_EQ(b.host, nullptr);
    EXPECT_EQ(b.flags, uint64_t(kiln_buffer_flag_device_dirty));
    EXPECT_EQ(b.dim[2].stride, 12);
    EXPECT_EQ(kiln_buffer_size_in_bytes(&b), 24u * 4u);
}

TEST(DLPack, ACUDATensorWithoutACUDADriverBecomesADeviceBufferWithoutAnInterface) {
    // No driver at this path, whatever the machine has (CUDATest covers the fake driver).
    const char *previous = std::getenv("KILN_CUDA_DRIVER");
    std::string saved = previous ? previous : "";
    setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    kiln_cuda_device_interface()->release();
    kiln_clear_error();
    Tensor t;
    t.tensor.data = fake_handle(0x7000000);
    t.tensor.byte_offset = 64;
    t.tensor.device = {kDLCUDA, 0};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    EXPECT_EQ(b.device, 0x7000040u);
    EXPECT_EQ(b.device_interface, nullptr);
    EXPECT_EQ(b.host, nullptr);
    EXPECT_EQ(b.flags, uint64_t(kiln_buffer_flag_device_dirty));
    // The failed probe of the driver leaves no error message behind.
    EXPECT_STREQ(kiln_last_error_message(), "");
    kiln_cuda_device_interface()->release();
    if (previous)
        setenv("KILN_CUDA_DRIVER", saved.c_str(), 1);
    else
        unsetenv("KILN_CUDA_DRIVER");
}

TEST(DLPack, DeviceTensorsNeedDeviceZeroAndNonNegativeStrides) {
    Tensor t;
    t.tensor.data = fake_handle(0x5000);
    t.tensor.device = {kDLOpenCL, 1};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_from_dltensor: the OpenCL tensor is on "
                                            "device 1; kiln uses device 0 only");
    t.tensor.device = {kDLCUDA, 0};
    int64_t strides[3] = {12, 4, -1};
    t.tensor.strides = strides;
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_bad_stride);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_from_dltensor: axis 2 of the CUDA tensor has stride -1; device "
                 "tensors need non-negative strides");
}

TEST(DLPack, AnOpenCLTensorCannotHaveAByteOffset) {
    Tensor t;
    t.tensor.data = fake_handle(0x5000);
    t.tensor.byte_offset = 16;
    t.tensor.device = {kDLOpenCL, 0};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_from_dltensor: the OpenCL tensor has byte_offset 16; a cl_mem "
                 "cannot be offset, so it must be 0");
}

TEST(DLPack, TooManyDimensionsForTheStorageAreRejected) {
    Tensor t;
    kiln_buffer_t b;
    kiln_dimension_t dims[2];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 2), kiln_error_bad_dimensions);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_from_dltensor: the tensor has 3 "
                                            "dimensions but dims_storage has room for 2");
}

TEST(DLPack, UnsupportedTypeCodesAreRejectedByName) {
    Tensor t;
    t.tensor.dtype = {kDLComplex, 64, 1};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_bad_type);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_from_dltensor: DLPack type code 5 (complex) is not supported");
}

TEST(DLPack, BFloat16TensorsBecomeBFloat16Buffers) {
    Tensor t;
    t.tensor.dtype = {kDLBfloat, 16, 1};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success)
        << kiln_last_error_message();
    EXPECT_EQ(b.type.code, kiln_type_bfloat);
    EXPECT_EQ(b.type.bits, 16);
}

TEST(DLPack, BoolTensorsMustUseOneBytePerElement) {
    Tensor t;
    t.tensor.dtype = {6, 1, 1};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_bad_type);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_from_dltensor: bool tensors must have 8 bits, got 1");
}

TEST(DLPack, ZeroBitsOrLanesAreRejected) {
    Tensor t;
    t.tensor.dtype = {kDLFloat, 32, 0};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_bad_type);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_from_dltensor: the tensor type has 32 bits and 0 lanes");
}

TEST(DLPack, ExtentsBeyond32BitsAreRejected) {
    Tensor t;
    t.shape[0] = int64_t(1) << 32;
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_bad_dimensions);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_from_dltensor: axis 0 has extent "
                                            "4294967296; extents must be in [0, 2147483647]");
}

TEST(DLPack, StridesBeyond32BitsAreRejected) {
    Tensor t;
    int64_t strides[3] = {int64_t(1) << 33, 4, 1};
    t.tensor.strides = strides;
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    EXPECT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_error_bad_stride);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_from_dltensor: axis 0 has stride "
                                            "8589934592, which does not fit in 32 bits");
}

TEST(DLPack, AFailedConversionLeavesTheOutputUntouched) {
    Tensor t;
    t.shape[0] = -1;
    kiln_buffer_t b{};
    b.dimensions = 77;
    kiln_dimension_t dims[3];
    EXPECT_NE(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    EXPECT_EQ(b.dimensions, 77);
}

TEST(DLPack, NullArgumentsAreNamed) {
    kiln_buffer_t b;
    EXPECT_EQ(kiln_buffer_from_dltensor(nullptr, &b, nullptr, 0), kiln_error_buffer_argument_null);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_from_dltensor: the tensor is null");
    DLTensor t;
    EXPECT_EQ(kiln_buffer_to_dltensor(nullptr, &t, nullptr, nullptr, 0),
              kiln_error_buffer_argument_null);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_to_dltensor: the buffer is null");
}

TEST(DLPack, ADeviceHandleWithoutAnInterfaceIsRejected) {
    kiln_buffer_t b{};
    b.device = 1234;
    b.type = {kiln_type_float, 32, 1};
    DLTensor t;
    EXPECT_EQ(kiln_buffer_to_dltensor(&b, &t, nullptr, nullptr, 0), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_to_dltensor: the buffer has a device handle but no device "
                 "interface, so its device type is unknown");
}

namespace {

// A device buffer of shape {3, 4} (DLPack order) on an interface with the given name; only the
// name is read by the conversions.
struct DeviceBuffer {
    kiln_device_interface_t iface{};
    kiln_dimension_t dims[2] = {{0, 4, 1, 0}, {0, 3, 4, 0}};
    kiln_buffer_t b{};
    explicit DeviceBuffer(const char *name) {
        iface.name = name;
        b.device = 0x9000;
        b.device_interface = &iface;
        b.type = {kiln_type_float, 32, 1};
        b.dimensions = 2;
        b.dim = dims;
    }
};

} // namespace

TEST(DLPack, ABufferWithAnOpenCLOrCUDACopyExportsTheDeviceHandle) {
    for (const char *name : {"opencl", "cuda"}) {
        DeviceBuffer d(name);
        float host[12];
        d.b.host = reinterpret_cast<uint8_t *>(host); // the device copy wins
        DLTensor t;
        int64_t shape[2], strides[2];
        ASSERT_EQ(kiln_buffer_to_dltensor(&d.b, &t, shape, strides, 2), kiln_success)
            << kiln_last_error_message();
        EXPECT_EQ(t.device.device_type, std::string(name) == "opencl" ? kDLOpenCL : kDLCUDA);
        EXPECT_EQ(t.device.device_id, 0);
        EXPECT_EQ(t.data, fake_handle(0x9000));
        EXPECT_EQ(shape[0], 3);
        EXPECT_EQ(strides[0], 4);
    }
}

TEST(DLPack, AStaleDeviceCopyOrAnUnknownInterfaceIsNotExported) {
    DeviceBuffer d("opencl");
    d.b.flags = kiln_buffer_flag_host_dirty;
    DLTensor t;
    int64_t shape[2], strides[2];
    EXPECT_EQ(kiln_buffer_to_dltensor(&d.b, &t, shape, strides, 2), kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_to_dltensor: the buffer's host copy is newer than its device copy "
                 "(host_dirty); call kiln_buffer_copy_to_device first");
    DeviceBuffer other("metal");
    EXPECT_EQ(kiln_buffer_to_dltensor(&other.b, &t, shape, strides, 2),
              kiln_error_device_unavailable);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_to_dltensor: the buffer's device interface 'metal' has no DLPack "
                 "device type");
}

TEST(DLPack, AnOpenCLBufferRoundTripsThroughDLPack) {
    Tensor t;
    t.tensor.data = fake_handle(0x5000);
    t.tensor.device = {kDLOpenCL, 0};
    kiln_buffer_t b;
    kiln_dimension_t dims[3];
    ASSERT_EQ(kiln_buffer_from_dltensor(&t.tensor, &b, dims, 3), kiln_success);
    DLTensor back;
    int64_t shape[3], strides[3];
    ASSERT_EQ(kiln_buffer_to_dltensor(&b, &back, shape, strides, 3), kiln_success)
        << kiln_last_error_message();
    EXPECT_EQ(back.device.device_type, kDLOpenCL);
    EXPECT_EQ(back.data, t.tensor.data);
    EXPECT_EQ(shape[0], 2);
    EXPECT_EQ(strides[0], 12);
}

TEST(DLPack, ABufferWithoutHostMemoryIsRejected) {
    kiln_buffer_t b{};
    b.type = {kiln_type_float, 32, 1};
    DLTensor t;
    EXPECT_EQ(kiln_buffer_to_dltensor(&b, &t, nullptr, nullptr, 0),
              kiln_error_buffer_argument_null);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_to_dltensor: the buffer has no host memory (host is null)");
}

TEST(DLPack, ABufferWithMoreDimensionsThanTheStorageIsRejected) {
    float data[8];
    kiln_dimension_t dims[2] = {{0, 4, 1, 0}, {0, 2, 4, 0}};
    kiln_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(data);
    b.type = {kiln_type_float, 32, 1};
    b.dimensions = 2;
    b.dim = dims;
    DLTensor t;
    int64_t shape[1], strides[1];
    EXPECT_EQ(kiln_buffer_to_dltensor(&b, &t, shape, strides, 1), kiln_error_bad_dimensions);
    EXPECT_STREQ(kiln_last_error_message(), "kiln_buffer_to_dltensor: the buffer has 2 dimensions "
                                            "but the shape and stride storage have room for 1");
}

TEST(DLPack, ABufferWithAnUnknownTypeCodeIsRejected) {
    float data[1];
    kiln_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(data);
    b.type = {7, 32, 1};
    DLTensor t;
    EXPECT_EQ(kiln_buffer_to_dltensor(&b, &t, nullptr, nullptr, 0), kiln_error_bad_type);
    EXPECT_STREQ(kiln_last_error_message(),
                 "kiln_buffer_to_dltensor: the buffer has unknown type code 7");
}
