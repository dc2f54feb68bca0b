/* Exact rounding of double to f16, bf16, f32 and i32 (ir/dtype.c). */
#include "testlib.h"

#include <math.h>

#include "ir/ir.h"

static void test_f16_rounding(void **state)
{
    (void)state;
    assert_int_equal(mc_f16_from_double(1.0), 0x3C00);
    assert_int_equal(mc_f16_from_double(-2.0), 0xC000);
    assert_int_equal(mc_f16_from_double(65504.0), 0x7BFF);
    assert_int_equal(mc_f16_from_double(65519.99), 0x7BFF);
    assert_int_equal(mc_f16_from_double(65520.0), 0x7C00); /* ties to even: overflows */
    assert_int_equal(mc_f16_from_double(1.0 + 1.0 / 2048), 0x3C00); /* tie -> even (down) */
    assert_int_equal(mc_f16_from_double(1.0 + 3.0 / 2048), 0x3C02); /* tie -> even (up) */
    assert_int_equal(mc_f16_from_double(ldexp(1, -24)), 0x0001);    /* smallest subnormal */
    assert_int_equal(mc_f16_from_double(ldexp(1, -25)), 0x0000);    /* tie -> even zero */
    assert_int_equal(mc_f16_from_double(ldexp(3, -26)), 0x0001);
    assert_int_equal(mc_f16_from_double(INFINITY), 0x7C00);
    assert_true((mc_f16_from_double(NAN) & 0x7C00) == 0x7C00 && (mc_f16_from_double(NAN) & 0x3FF));
    assert_true(mc_f16_to_double(0x3555) == 0.333251953125);
    for (uint32_t h = 0; h < 0x10000; h++) { /* every finite half round-trips */
        double d = mc_f16_to_double((uint16_t)h);
        if (!isnan(d))
            assert_int_equal(mc_f16_from_double(d), h);
    }
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(mc_bf16_from_double(1.0), 0x3F80);
    assert_int_equal(mc_bf16_from_double(1.0 + 1.0 / 256), 0x3F80); /* tie -> even */
    assert_int_equal(mc_bf16_from_double(1.0 + 3.0 / 256), 0x3F82);
    assert_int_equal(mc_bf16_from_double(3.4e38), 0x7F80);
    for (uint32_t h = 0; h < 0x10000; h++) {
        double d = mc_bf16_to_double((uint16_t)h);
        if (!isnan(d))
            assert_int_equal(mc_bf16_from_double(d), h);
    }
}

static void test_f32_and_i32(void **state)
{
    (void)state;
    assert_true(mc_f32_from_double(0.1) == 0.1f);
    assert_true(isinf(mc_f32_from_double(1e39)));
    assert_true(mc_round_to_dtype(-2.7, MC_I32) == -2);
    assert_true(mc_round_to_dtype(2.7, MC_I32) == 2);
    assert_true(mc_round_to_dtype(1e12, MC_I32) == 2147483647.0);
    assert_true(mc_round_to_dtype(-1e12, MC_I32) == -2147483648.0);
    assert_true(mc_round_to_dtype(NAN, MC_I32) == 0);
    assert_true(mc_round_to_dtype(0.5, MC_BOOL) == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_rounding),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_f32_and_i32),
    };
    return mc_test_run(tests);
}
