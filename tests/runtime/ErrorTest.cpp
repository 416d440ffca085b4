#include "runtime/kiln_runtime.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

TEST(Error, ReturnsItsCodeAndRecordsTheFormattedMessage) {
    int code = kiln_error(kiln_error_bad_type, "buffer '%s' has %d lanes", "in", 4);
    EXPECT_EQ(code, kiln_error_bad_type);
    EXPECT_STREQ(kiln_last_error_message(), "buffer 'in' has 4 lanes");
}

TEST(Error, ClearingForgetsTheMessage) {
    kiln_error(kiln_error_generic, "something failed");
    kiln_clear_error();
    EXPECT_STREQ(kiln_last_error_message(), "");
}

TEST(Error, EachThreadKeepsItsOwnMessage) {
    kiln_error(kiln_error_generic, "main thread");
    std::string other;
    std::thread t([&] {
        kiln_error(kiln_error_generic, "worker thread");
        other = kiln_last_error_message();
    });
    t.join();
    EXPECT_EQ(other, "worker thread");
    EXPECT_STREQ(kiln_last_error_message(), "main thread");
}

TEST(Error, LongMessagesAreTruncatedToTheBuffer) {
    std::string long_name(5000, 'x');
    kiln_error(kiln_error_generic, "buffer '%s'", long_name.c_str());
    std::string message = kiln_last_error_message();
    EXPECT_EQ(message.size(), 1023u);
    EXPECT_EQ(message.substr(0, 8), "buffer '");
}

TEST(Error, CodeNamesSpellTheEnumerators) {
    EXPECT_STREQ(kiln_error_code_name(kiln_success), "kiln_success");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_generic), "kiln_error_generic");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_out_of_memory), "kiln_error_out_of_memory");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_buffer_argument_null),
                 "kiln_error_buffer_argument_null");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_bad_type), "kiln_error_bad_type");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_no_device), "kiln_error_no_device");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_device_compile), "kiln_error_device_compile");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_device_run), "kiln_error_device_run");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_device_memory), "kiln_error_device_memory");
    EXPECT_STREQ(kiln_error_code_name(-16), "unknown error code");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_bad_dimensions), "kiln_error_bad_dimensions");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_access_out_of_bounds),
                 "kiln_error_access_out_of_bounds");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_bad_stride), "kiln_error_bad_stride");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_param_out_of_range),
                 "kiln_error_param_out_of_range");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_device_unavailable),
                 "kiln_error_device_unavailable");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_assertion_failed), "kiln_error_assertion_failed");
    EXPECT_STREQ(kiln_error_code_name(kiln_error_internal), "kiln_error_internal");
}

TEST(Error, UnknownCodesAreNamedAsUnknown) {
    EXPECT_STREQ(kiln_error_code_name(-1234), "unknown error code");
    EXPECT_STREQ(kiln_error_code_name(7), "unknown error code");
}
