/* The roofline chart (--roofline FILE.svg; docs/PROFILING.md): every timed kernel on log-log
 * axes of arithmetic intensity (FLOP/byte) and achieved FLOP/s under the device's roofs.
 *
 * Readable by construction: each group of kernels (the same code on the same shapes, the
 * profile's grouped view) gets its own colour and marker shape (10 colours x 6 shapes before
 * any repeats); each group is labelled once with its number, at the first of eight places
 * around its point (then farther out, with a leader line) whose box overlaps no marker, no
 * other label, no roof label and stays inside the plot; every roof is labelled with what it
 * is, its value and its unit; the legend lists every group with its marker, number, name,
 * count, time and percentages of peak. Written to a temporary name and renamed.
 */
#include "runtime/profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct box {
    double x0, y0, x1, y1;
} box;

typedef struct chart {
    FILE *f;
    double xmin, xmax, ymin, ymax;  /* axes, powers of ten */
    double L, T, pw, ph;            /* plot area */
    box *taken;                     /* markers and labels placed so far */
    int ntaken, cap;
} chart;

static double sx(const chart *c, double x)
{
    return c->L + c->pw * (log10(x) - log10(c->xmin)) / (log10(c->xmax) - log10(c->xmin));
}

static double sy(const chart *c, double y)
{
    return c->T + c->ph * (1 - (log10(y) - log10(c->ymin)) / (log10(c->ymax) - log10(c->ymin)));
}

static void take(chart *c, box b)
{
    if (c->ntaken == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        box *t = realloc(c->taken, (size_t)cap * sizeof *t);
        if (!t)
            return; /* out of memory: labels may overlap, nothing worse */
        c->taken = t;
        c->cap = cap;
    }
    c->taken[c->ntaken++] = b;
}

static bool is_free(const chart *c, box b)
{
    if (b.x0 < c->L + 2 || b.x1 > c->L + c->pw - 2 || b.y0 < c->T + 2 || b.y1 > c->T + c->ph - 2)
        return false;
    for (int i = 0; i < c->ntaken; i++) {
        const box *t = &c->taken[i];
        if (b.x0 < t->x1 && t->x0 < b.x1 && b.y0 < t->y1 && t->y0 < b.y1)
            return false;
    }
    return true;
}

/* Text width in pixels at font size `size` (sans-serif averages ~0.6 em per character). */
static double text_width(const char *s, double size) { return 0.6 * size * (double)strlen(s); }

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
enum { NCOLORS = 10, NSHAPES = 6 };

/* Marker `shape` (circle, square, triangle, diamond, inverted triangle, hexagon) of radius r
 * at (x, y). */
static void marker(FILE *f, int shape, double x, double y, double r, const char *color)
{
    switch (shape) {
    case 0:
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\"", x, y, r);
        break;
    case 1:
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"", x - r, y - r, 2 * r, 2 * r);
        break;
    case 2:
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"", x, y - 1.2 * r, x - 1.1 * r,
                y + 0.8 * r, x + 1.1 * r, y + 0.8 * r);
        break;
    case 3:
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\"", x, y - 1.3 * r,
                x + 1.3 * r, y, x, y + 1.3 * r, x - 1.3 * r, y);
        break;
    case 4:
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"", x, y + 1.2 * r, x - 1.1 * r,
                y - 0.8 * r, x + 1.1 * r, y - 0.8 * r);
        break;
    default:
        fprintf(f, "<polygon points=\"");
        for (int i = 0; i < 6; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", x + 1.15 * r * cos(i * M_PI / 3),
                    y + 1.15 * r * sin(i * M_PI / 3));
        fprintf(f, "\"");
        break;
    }
    fprintf(f, " fill=\"%s\" fill-opacity=\"0.85\" stroke=\"black\" stroke-width=\"0.6\"/>\n", color);
}

/* Place a label of size w x h for a point at (x, y): the first free box among eight places
 * around it at growing distances; a leader line when it is not next to the point. false when
 * nowhere is free (the legend still names the group). */
static bool place_label(chart *c, double x, double y, double w, double h, double *lx, double *ly)
{
    static const double dir[8][2] = {{1, -1}, {1, 1}, {-1, -1}, {-1, 1}, {0, -1}, {0, 1}, {1, 0}, {-1, 0}};
    for (int ring = 1; ring <= 6; ring++) {
        double d = 8.0 * ring;
        for (int i = 0; i < 8; i++) {
            double cx = x + dir[i][0] * (d + w / 2), cy = y + dir[i][1] * (d + h / 2);
            box b = {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2};
            if (!is_free(c, b))
                continue;
            take(c, b);
            *lx = cx;
            *ly = cy;
            if (ring > 1)
                fprintf(c->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
                              "stroke-width=\"0.7\"/>\n", x, y, cx - dir[i][0] * w / 2, cy - dir[i][1] * h / 2);
            return true;
        }
    }
    return false;
}

/* What a compute roof is: the unit of the first kernel compared with it. */
static void roof_name(const mc_profile *prof, double peak, char *buf, size_t size)
{
    const kir_program *kp = prof->program->kp;
    snprintf(buf, size, "compute peak");
    for (int k = 0; k < prof->nkernels; k++) {
        if (prof->peak_flops[k] != peak)
            continue;
        const kir_kernel *kk = &kp->kernels[k];
        if (!prof->program->backend->is_gpu) {
            snprintf(buf, size, "f32 FMA peak");
        } else if (kk->category == KIR_GEMM || kk->category == KIR_ATTENTION) {
            int v = kk->category == KIR_GEMM ? kk->gemm.a : kk->attn.q;
            mc_dtype d = kp->buffers[kk->views[v].buffer].dtype;
            snprintf(buf, size, "%s %s", mc_dtype_name(d),
                     d == MC_F32 ? (kk->category == KIR_GEMM && kk->gemm.tf32 ? "TF32 tensor cores" : "FMA")
                                 : "tensor cores");
        } else {
            snprintf(buf, size, "f32 FMA peak");
        }
        return;
    }
}

static void draw_axes(chart *c, const mc_profile *prof, double W, double H)
{
    FILE *f = c->f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">Roofline: %s on ", c->L,
            prof->program->backend->name);
    xml_text(f, prof->device[0] ? prof->device : "host");
    fprintf(f, " (%s; peaks: %s)</text>\n", prof->program->opt.fuse ? "fused" : "unfused",
            prof->peaks_source ? prof->peaks_source : "none");
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n",
            c->L, c->T, c->pw, c->ph);
    for (double x = c->xmin; x <= c->xmax * 1.001; x *= 10)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e4e4e4\"/>"
                   "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n",
                sx(c, x), c->T, sx(c, x), c->T + c->ph, sx(c, x), c->T + c->ph + 16, x);
    for (double y = c->ymin; y <= c->ymax * 1.001; y *= 10)
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                c->L, sy(c, y), c->L + c->pw, sy(c, y), c->L - 6, sy(c, y) + 4, y / 1e9);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>\n",
            c->L + c->pw / 2, c->T + c->ph + 38);
    fprintf(f, "<text transform=\"translate(22 %.0f) rotate(-90)\" text-anchor=\"middle\">achieved GFLOP/s</text>\n",
            c->T + c->ph / 2);
}

/* The roofs: the memory slope and one flat roof per distinct compute peak, each labelled. */
static void draw_roofs(chart *c, const mc_profile *prof)
{
    FILE *f = c->f;
    double bw = prof->peak_bytes_per_s;
    if (!(bw > 0)) {
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#c33\">device peaks unknown: no roof</text>\n",
                c->L + 8, c->T + 16);
        take(c, (box){c->L, c->T, c->L + 220, c->T + 22});
        return;
    }
    double drawn[16];
    int ndrawn = 0;
    double top = 0;
    for (int k = 0; k < prof->nkernels; k++) {
        double peak = prof->peak_flops[k];
        bool seen = !(peak > 0);
        for (int i = 0; i < ndrawn && !seen; i++)
            seen = fabs(drawn[i] - peak) <= 0.005 * peak; /* the same roof within 0.5% */
        if (seen || ndrawn == 16)
            continue;
        drawn[ndrawn++] = peak;
        top = fmax(top, peak);
        double ridge = peak / bw;
        fprintf(f, "<polyline fill=\"none\" stroke=\"#c33\" stroke-width=\"2\" points=\"%.1f,%.1f %.1f,%.1f\"/>\n",
                sx(c, ridge), sy(c, peak), sx(c, c->xmax), sy(c, peak));
        char name[64], label[160];
        roof_name(prof, peak, name, sizeof name);
        snprintf(label, sizeof label, "%s: %.3g TFLOP/s", name, peak / 1e12);
        if (peak < 1e12)
            snprintf(label, sizeof label, "%s: %.3g GFLOP/s", name, peak / 1e9);
        double w = text_width(label, 11), x1 = sx(c, c->xmax) - 4, y = sy(c, peak);
        box b = {x1 - w, y - 16, x1, y - 3};
        if (!is_free(c, b)) /* another roof's label there: below the line instead */
            b = (box){x1 - w, y + 3, x1, y + 16};
        take(c, b);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c33\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
                x1, b.y1 - 2, label);
    }
    /* The memory slope up to the highest ridge, labelled along it. */
    double x0 = fmax(c->xmin, c->ymin / bw), ridge = top / bw;
    fprintf(f, "<polyline fill=\"none\" stroke=\"#c33\" stroke-width=\"2\" points=\"%.1f,%.1f %.1f,%.1f\"/>\n",
            sx(c, x0), sy(c, x0 * bw), sx(c, ridge), sy(c, top));
    double ax = sx(c, x0), ay = sy(c, x0 * bw), bx = sx(c, ridge), by = sy(c, top);
    double angle = atan2(by - ay, bx - ax);
    char label[64];
    snprintf(label, sizeof label, "memory: %.4g GB/s", bw / 1e9);
    double w = text_width(label, 11);
    /* Along the slope, just above it: the first place whose bounding box is free. */
    static const double along[] = {0.3, 0.45, 0.15, 0.6, 0.05, 0.75};
    double mx = ax + 0.3 * (bx - ax), my = ay + 0.3 * (by - ay);
    for (size_t i = 0; i < sizeof along / sizeof *along; i++) {
        double x = ax + along[i] * (bx - ax), y = ay + along[i] * (by - ay);
        double ex = x + w * cos(angle), ey = y + w * sin(angle);
        box b = {fmin(x, ex), fmin(y, ey) - 16, fmax(x, ex), fmax(y, ey) - 2};
        if (is_free(c, b)) {
            mx = x;
            my = y;
            take(c, b);
            break;
        }
    }
    fprintf(f, "<text transform=\"translate(%.1f %.1f) rotate(%.1f)\" fill=\"#c33\" font-size=\"11\" "
               "dy=\"-5\">%s</text>\n", mx, my, angle * 180 / M_PI, label);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c33\" font-size=\"10\" text-anchor=\"middle\">ridge %.3g FLOP/B</text>\n",
            bx, by + 14, ridge);
    take(c, (box){bx - 45, by + 3, bx + 45, by + 17});
}

/* Axis ranges (log-log, powers of ten) covering every kernel and every ridge point. */
static void axis_ranges(chart *c, const mc_profile *prof)
{
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0, pmax = 0, pmin = INFINITY;
    for (int k = 0; k < prof->nkernels; k++) {
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        if (r.intensity > 0 && r.flops_per_s > 0) {
            xmin = fmin(xmin, r.intensity);
            xmax = fmax(xmax, r.intensity);
            ymin = fmin(ymin, r.flops_per_s);
            ymax = fmax(ymax, r.flops_per_s);
        }
        pmax = fmax(pmax, prof->peak_flops[k]);
        if (prof->peak_flops[k] > 0)
            pmin = fmin(pmin, prof->peak_flops[k]);
    }
    double bw = prof->peak_bytes_per_s;
    if (pmax > 0 && bw > 0) {
        xmin = fmin(xmin, pmin / bw);
        xmax = fmax(xmax, pmax / bw);
        ymax = fmax(ymax, pmax);
    }
    if (!(xmin < INFINITY))
        xmin = 0.1;
    if (!(xmax > 0))
        xmax = 10;
    if (!(ymin < INFINITY))
        ymin = 1e6;
    if (!(ymax > 0))
        ymax = 1e12;
    c->xmin = pow(10, floor(log10(xmin / 2)));
    c->xmax = pow(10, ceil(log10(xmax * 4))); /* room for the roofs' labels on the right */
    c->ymin = pow(10, floor(log10(ymin / 2)));
    c->ymax = pow(10, ceil(log10(ymax * 3)));
}

static mc_status write_roofline(FILE *f, void *ctx)
{
    const mc_profile *prof = ctx;
    const kir_program *kp = prof->program->kp;
    int n = prof->nkernels;
    int *group = calloc(n > 0 ? (size_t)n : 1, sizeof *group);
    int *index = calloc(n > 0 ? (size_t)n : 1, sizeof *index); /* group -> its number, by first kernel */
    if (!group || !index) {
        free(group);
        free(index);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    mc_profile_group_of(prof, group);
    int ngroups = 0;
    for (int k = 0; k < n; k++) /* the prep kernels run with no run: not drawn (groups keep them apart) */
        index[k] = group[k] != k ? index[group[k]] : kp->kernels[k].prep ? -1 : ngroups++;
    const double legend_w = 360, row = 17;
    chart c = {.f = f, .L = 80, .T = 44, .pw = 620, .ph = 500};
    double W = c.L + c.pw + 20 + legend_w;
    double H = fmax(c.T + c.ph + 60, c.T + 40 + row * (ngroups + 2));
    axis_ranges(&c, prof);
    draw_axes(&c, prof, W, H);
    /* Every marker first, so no label is placed over one drawn later. */
    for (int k = 0; k < n; k++) {
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        if (!(r.flops_per_s > 0 && r.intensity > 0))
            continue;
        double x = sx(&c, r.intensity), y = sy(&c, r.flops_per_s);
        take(&c, (box){x - 7, y - 7, x + 7, y + 7});
    }
    draw_roofs(&c, prof);
    bool *labelled = calloc((size_t)(ngroups > 0 ? ngroups : 1), sizeof *labelled);
    for (int k = 0; k < n && labelled; k++) {
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        if (!(r.flops_per_s > 0 && r.intensity > 0))
            continue;
        int g = index[k];
        if (g < 0)
            continue;
        const char *color = colors[g % NCOLORS];
        double x = sx(&c, r.intensity), y = sy(&c, r.flops_per_s);
        fprintf(f, "<g><title>");
        xml_text(f, kp->kernels[k].name);
        fprintf(f, ": %.4g GFLOP/s, %.3g FLOP/B, %.2f us</title>\n", r.flops_per_s / 1e9, r.intensity,
                prof->time_us[k]);
        marker(f, (g / NCOLORS) % NSHAPES, x, y, 5.5, color);
        fprintf(f, "</g>\n");
        if (labelled[g])
            continue;
        labelled[g] = true;
        char num[16];
        snprintf(num, sizeof num, "%d", g);
        double lx, ly;
        if (place_label(&c, x, y, text_width(num, 11) + 2, 13, &lx, &ly))
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" font-weight=\"bold\" fill=\"%s\" "
                       "text-anchor=\"middle\">%s</text>\n", lx, ly + 4, color, num);
    }
    free(labelled);
    /* The legend: one row per group, in the order of the kernel list. */
    double lx = c.L + c.pw + 20, ly = c.T + 4;
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">#  kernel (xN)  time  %%peak F / BW</text>\n",
            lx, ly);
    for (int k = 0, g = 0; k < n; k++) {
        if (group[k] != k || index[k] < 0)
            continue;
        int count = 0;
        double t = 0;
        for (int j = 0; j < n; j++)
            if (group[j] == k) {
                count++;
                t += prof->time_us[j];
            }
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        double y = ly + row * (g + 1);
        marker(f, (g / NCOLORS) % NSHAPES, lx + 6, y - 4, 5, colors[g % NCOLORS]);
        char name[160];
        snprintf(name, sizeof name, "%.*s", (int)mc_profile_base_name_len(kp->kernels[k].name),
                 kp->kernels[k].name);
        if (strlen(name) > 30)
            snprintf(name + 27, sizeof name - 27, "...");
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\">%d ", lx + 16, y, g);
        xml_text(f, name);
        if (count > 1)
            fprintf(f, " x%d", count);
        if (isnan(t))
            fprintf(f, "  (not timed)");
        else if (!(r.flops_per_s > 0))
            fprintf(f, "  %.1f us (no FLOPs: not plotted)", t);
        else
            fprintf(f, "  %.1f us  %.0f%% / %.0f%%", t, r.pct_peak_flops, r.pct_peak_bw);
        fprintf(f, "</text>\n");
        g++;
    }
    fprintf(f, "</svg>\n");
    free(c.taken);
    free(group);
    free(index);
    return MC_OK;
}

mc_status mc_profile_write_roofline(const mc_profile *prof, const char *path)
{
    return mc_file_write_atomic(path, write_roofline, (void *)prof);
}
