/* Dtypes: names, sizes, and exact rounding between double and the storage formats.
 *
 * The reference backend computes in double and rounds once per stored value, so the rounding
 * here must be right to the last bit: every format is rounded directly from double with
 * round-to-nearest-even (never double -> float -> half, which can round twice), subnormals and
 * overflow to infinity included.
 */
#include "ir/ir.h"

#include <math.h>
#include <string.h>

static const char *const dtype_names[MC_NUM_DTYPES] = {"f32", "f16", "bf16", "i32", "bool"};
static const size_t dtype_sizes[MC_NUM_DTYPES] = {4, 2, 2, 4, 1};

const char *mc_dtype_name(mc_dtype d) { return (unsigned)d < MC_NUM_DTYPES ? dtype_names[d] : "?"; }
size_t mc_dtype_size(mc_dtype d) { return (unsigned)d < MC_NUM_DTYPES ? dtype_sizes[d] : 0; }
bool mc_dtype_is_float(mc_dtype d) { return d == MC_F32 || d == MC_F16 || d == MC_BF16; }

bool mc_dtype_parse(const char *name, mc_dtype *out)
{
    if (!name || !out) {
        mc_fail(MC_ERR_INPUT, "mc_dtype_parse: no %s", name ? "place for the result" : "name");
        return false;
    }
    for (int i = 0; i < MC_NUM_DTYPES; i++)
        if (strcmp(name, dtype_names[i]) == 0) {
            *out = (mc_dtype)i;
            return true;
        }
    mc_fail(MC_ERR_INPUT, "unknown dtype '%.64s' (expected f32, f16, bf16, i32 or bool)", name);
    return false;
}

/* Round |a| (finite, > 0) to a binary format with `mbits` stored mantissa bits and normal
 * exponents [emin, emax]; returns INFINITY on overflow. nearbyint rounds half to even. */
static double round_format(double a, int mbits, int emin, int emax)
{
    int ex;
    frexp(a, &ex);
    int e = ex - 1; /* a in [2^e, 2^(e+1)) */
    if (e < emin)
        e = emin; /* subnormal: fixed quantum */
    double r = ldexp(nearbyint(ldexp(a, mbits - e)), e - mbits);
    double max = ldexp(2.0 - ldexp(1.0, -mbits), emax);
    return r > max ? INFINITY : r;
}

static double round_signed(double x, int mbits, int emin, int emax)
{
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    double r = round_format(fabs(x), mbits, emin, emax);
    return x < 0 ? -r : r;
}

/* Encode a value already representable in a format with `mbits` mantissa bits and
 * `ebits` exponent bits. */
static uint16_t encode16(double x, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint16_t sign = signbit(x) ? (uint16_t)(1u << 15) : 0;
    uint16_t expmask = (uint16_t)(((1u << ebits) - 1) << mbits);
    if (isnan(x))
        return sign | expmask | (uint16_t)(1u << (mbits - 1));
    double a = fabs(x);
    if (isinf(a))
        return sign | expmask;
    if (a == 0)
        return sign;
    int e = ilogb(a);
    if (e < 1 - bias) /* subnormal */
        return sign | (uint16_t)ldexp(a, bias - 1 + mbits);
    uint16_t m = (uint16_t)(ldexp(a, mbits - e) - ldexp(1.0, mbits));
    return sign | (uint16_t)((e + bias) << mbits) | m;
}

static double decode16(uint16_t h, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    int e = (h >> mbits) & ((1 << ebits) - 1);
    int m = h & ((1 << mbits) - 1);
    double s = (h >> 15) ? -1.0 : 1.0;
    if (e == (1 << ebits) - 1)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp(m, 1 - bias - mbits);
    return s * ldexp(m + ldexp(1.0, mbits), e - bias - mbits);
}

uint16_t mc_f16_from_double(double x) { return encode16(round_signed(x, 10, -14, 15), 10, 5); }
uint16_t mc_bf16_from_double(double x) { return encode16(round_signed(x, 7, -126, 127), 7, 8); }
double mc_f16_to_double(uint16_t h) { return decode16(h, 10, 5); }
double mc_bf16_to_double(uint16_t h) { return decode16(h, 7, 8); }
float mc_f32_from_double(double x) { return (float)round_signed(x, 23, -126, 127); }

static int32_t i32_from_double(double x)
{
    if (isnan(x))
        return 0;
    if (x >= 2147483647.0)
        return INT32_MAX;
    if (x <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)x; /* truncates toward zero */
}

double mc_round_to_dtype(double x, mc_dtype d)
{
    switch (d) {
    case MC_F32: return round_signed(x, 23, -126, 127);
    case MC_F16: return round_signed(x, 10, -14, 15);
    case MC_BF16: return round_signed(x, 7, -126, 127);
    case MC_I32: return i32_from_double(x);
    case MC_BOOL: return x != 0;
    default: MC_UNREACHABLE("bad dtype");
    }
}

double mc_saturate_to_dtype(double x, mc_dtype d)
{
    double limit = d == MC_F16 ? 65520.0 : d == MC_BF16 ? 0x1.ffp127 : INFINITY;
    return fabs(x) >= limit ? copysign(INFINITY, x) : x; /* NaN compares false: kept */
}

double mc_load_element(const void *data, mc_dtype d, int64_t i)
{
    switch (d) {
    case MC_F32: return ((const float *)data)[i];
    case MC_F16: return mc_f16_to_double(((const uint16_t *)data)[i]);
    case MC_BF16: return mc_bf16_to_double(((const uint16_t *)data)[i]);
    case MC_I32: return ((const int32_t *)data)[i];
    case MC_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: MC_UNREACHABLE("bad dtype");
    }
}

void mc_store_element(void *data, mc_dtype d, int64_t i, double x)
{
    switch (d) {
    case MC_F32: ((float *)data)[i] = mc_f32_from_double(x); break;
    case MC_F16: ((uint16_t *)data)[i] = mc_f16_from_double(x); break;
    case MC_BF16: ((uint16_t *)data)[i] = mc_bf16_from_double(x); break;
    case MC_I32: ((int32_t *)data)[i] = i32_from_double(x); break;
    case MC_BOOL: ((uint8_t *)data)[i] = x != 0; break;
    default: MC_UNREACHABLE("bad dtype");
    }
}
