// Calls the kernel of the C++-only consumer; prints "cxx_only_consumer: ok" when it is right.
#include <cstdio>
#include <vector>

#include "cxx_only_scale.h"

int main() {
    std::vector<float> in(37), out(37, -1.f);
    for (size_t i = 0; i < in.size(); i++) {
        in[i] = float(i);
    }
    kiln_dimension_t in_dim{0, 37, 1, 0}, out_dim{0, 37, 1, 0};
    kiln_buffer_t in_buf{}, out_buf{};
    in_buf.host = reinterpret_cast<uint8_t *>(in.data());
    in_buf.type = {kiln_type_float, 32, 1};
    in_buf.dimensions = 1;
    in_buf.dim = &in_dim;
    out_buf = in_buf;
    out_buf.host = reinterpret_cast<uint8_t *>(out.data());
    out_buf.dim = &out_dim;
    if (int rc = cxx_only_scale(&in_buf, 2.5f, &out_buf); rc != 0) {
        std::printf("cxx_only_consumer: kernel failed (%d): %s\n", rc, kiln_last_error_message());
        return 1;
    }
    for (size_t i = 0; i < out.size(); i++) {
        if (out[i] != 2.5f * float(i)) {
            std::printf("cxx_only_consumer: out[%zu] = %g, expected %g\n", i, out[i],
                        2.5f * float(i));
            return 1;
        }
    }
    std::printf("cxx_only_consumer: ok\n");
    return 0;
}
