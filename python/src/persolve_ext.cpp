/*
 * _persolve: the nanobind extension under `import persolve`. A thin layer
 * over the C API (include/persolve.h), the HDF5 module (src/io/h5io.h) and
 * the Pulseq export (src/io/pulseq.h); the Python package (the persolve folder)
 * adds the docstrings, the result objects and the plots on top.
 *
 * Arrays: float64 C-contiguous numpy arrays are passed to the library
 * without a copy (others are converted once by nanobind); arrays the
 * library fills are allocated here and handed to numpy without a copy
 * (a capsule owns them); a problem's arrays are read-only views that keep
 * the problem alive.
 *
 * Errors: every failing status raises persolve.Error (or the subclass of
 * its class, persolve/_errors.py) with the status, ps_strerror() and the
 * library's message (validation, preset, file, or the log's last error).
 *
 * The GIL is released around every call that may take long (solves,
 * evaluations, waits, file I/O); the optional progress callback of a run
 * takes it back to call into Python.
 */
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "persolve.h"
#include "persolve_gpu.h"
extern "C" {
#include "io/h5io.h"
#include "io/pulseq.h"
}

namespace nb = nanobind;
using namespace nb::literals;

// An input array of float64 on the CPU, C-contiguous (any shape: checked here).
using in_array = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using out_array = nb::ndarray<nb::numpy, double>;
using view_array = nb::ndarray<nb::numpy, const double>;

// ---- errors ---------------------------------------------------------------

// Raise persolve's exception for a status (persolve/_errors.py builds it).
[[noreturn]] static void raise_status(int status, const std::string &detail)
{
    nb::object errors = nb::module_::import_("persolve._errors");
    nb::object exc = errors.attr("_from_status")(status, detail);
    PyErr_SetObject((PyObject *)Py_TYPE(exc.ptr()), exc.ptr());
    throw nb::python_error();
}

static void check(int status, const std::string &detail = std::string())
{
    if (status < 0)
        raise_status(status, detail);
}

// The library's log: keeps the last error (or warning) message.
struct log_sink {
    std::mutex lock;
    std::string last;
    static void fn(void *user, int level, const char *file, int line, const char *msg)
    {
        (void)file;
        (void)line;
        auto *s = static_cast<log_sink *>(user);
        if (level > PS_LOG_WARNING || !msg)
            return;
        std::lock_guard<std::mutex> g(s->lock);
        s->last = msg;
    }
    std::string take()
    {
        std::lock_guard<std::mutex> g(lock);
        std::string m = last;
        last.clear();
        return m;
    }
};

// ---- arrays ---------------------------------------------------------------

static out_array new_array(std::initializer_list<size_t> shape)
{
    size_t n = 1;
    for (size_t s : shape)
        n *= s;
    double *buf = new double[n ? n : 1]();
    nb::capsule owner(buf, [](void *p) noexcept { delete[] static_cast<double *>(p); });
    return out_array(buf, shape, owner);
}

static std::string shape_str(const in_array &a)
{
    std::string s = "[";
    for (size_t i = 0; i < a.ndim(); i++)
        s += (i ? "," : "") + std::to_string(a.shape(i));
    return s + "]";
}

// Check that a has the shape `want` (0 in want: any extent, returned).
static void check_shape(const char *name, const in_array &a, std::vector<size_t> want)
{
    bool ok = a.ndim() == want.size();
    for (size_t i = 0; ok && i < want.size(); i++)
        ok = want[i] == a.shape(i);
    if (!ok) {
        std::string w = "[";
        for (size_t i = 0; i < want.size(); i++)
            w += (i ? "," : "") + std::to_string(want[i]);
        raise_status(PS_ERR_SIZE, std::string(name) + ": expected shape " + w + "]" +
                                      ", got " + shape_str(a));
    }
}

// ---- options --------------------------------------------------------------

// ps_options (and its ps_gpu_options) from a dict of keyword options.
struct options {
    ps_options o;
    ps_gpu_options gpu;
    log_sink log;
    options() { reset(); }
    void reset()
    {
        ps_options_default(&o);
        ps_gpu_options_default(&gpu);
        o.gpu = nullptr;
        o.log = log_sink::fn;
        o.log_user = &log;
    }
};

static void set_options(options &opt, const nb::dict &kw)
{
    ps_options &o = opt.o;
    bool any_gpu = false;
    for (auto [k, v] : kw) {
        std::string key = nb::cast<std::string>(k);
        if (v.is_none())
            continue;
        if (key == "backend") {
            std::string s = nb::cast<std::string>(v);
            if (s == "auto")
                o.backend = PS_BACKEND_AUTO;
            else if (s == "cpu")
                o.backend = PS_BACKEND_CPU;
            else if (s == "gpu")
                o.backend = PS_BACKEND_GPU;
            else
                raise_status(PS_ERR_OPTION, "backend: '" + s + "' is not auto, cpu or gpu");
        } else if (key == "precision") {
            std::string s = nb::cast<std::string>(v);
            if (s == "single")
                o.precision = PS_PRECISION_SINGLE;
            else if (s == "double")
                o.precision = PS_PRECISION_DOUBLE;
            else
                raise_status(PS_ERR_OPTION, "precision: '" + s + "' is not single or double");
        }
#define INT_OPTION(name, field)                                                              \
    else if (key == name) o.field = nb::cast<decltype(o.field)>(v);
#define REAL_OPTION(name, field)                                                             \
    else if (key == name) o.field = nb::cast<double>(v);
#define GPU_OPTION(name, field)                                                              \
    else if (key == name)                                                                    \
    {                                                                                        \
        opt.gpu.field = nb::cast<int>(v);                                                    \
        any_gpu = true;                                                                      \
    }
        INT_OPTION("memory", memory)
        INT_OPTION("max_iterations", max_iterations)
        INT_OPTION("max_evaluations", max_evaluations)
        REAL_OPTION("time_limit", time_limit)
        REAL_OPTION("gtol", gtol)
        REAL_OPTION("ftol", ftol)
        INT_OPTION("past", past)
        REAL_OPTION("c1", c1)
        REAL_OPTION("c2", c2)
        INT_OPTION("max_linesearch", max_linesearch)
        REAL_OPTION("fnoise", fnoise)
        INT_OPTION("threads", threads)
        INT_OPTION("max_rounds", max_rounds)
        REAL_OPTION("constraint_tol", constraint_tol)
        REAL_OPTION("penalty_mu", penalty_mu)
        GPU_OPTION("tune_cache", tune_cache)
        GPU_OPTION("gpu_block", gpu_block)
        GPU_OPTION("gpu_spins_per_tile", gpu_spins_per_tile)
        GPU_OPTION("gpu_max_registers", gpu_max_registers)
        GPU_OPTION("gpu_blocks_per_sm", gpu_blocks_per_sm)
        GPU_OPTION("batch_team_blocks", batch_team_blocks)
        GPU_OPTION("batch_team_barrier", batch_team_barrier)
        GPU_OPTION("gpu_grid", gpu_grid)
        GPU_OPTION("gpus", gpus)
#undef INT_OPTION
#undef REAL_OPTION
#undef GPU_OPTION
        else raise_status(PS_ERR_OPTION, "unknown option '" + key + "'");
    }
    o.gpu = any_gpu ? &opt.gpu : nullptr;
    int st = ps_options_validate(&o);
    if (st != 0)
        raise_status(st, opt.log.take());
}

// ---- problems -------------------------------------------------------------

struct Problem {
    ps_problem *p = nullptr;
    Problem() = default;
    explicit Problem(ps_problem *q) : p(q) {}
    Problem(const Problem &) = delete;
    Problem &operator=(const Problem &) = delete;
    ~Problem() { ps_problem_free(p); }
    size_t nx() const { return ps_problem_nx(p); }
};

using opt_array = std::optional<in_array>;

static Problem *problem_from_arrays(in_array r, in_array target, in_array g, double dt,
                                    opt_array df, opt_array b1scale, opt_array w, opt_array m0,
                                    opt_array t1, opt_array t2, opt_array b1map, opt_array b1,
                                    opt_array vop, opt_array rf_mask, opt_array b1_max_channel,
                                    double gamma_bar, double lambda, const std::string &loss,
                                    std::optional<double> b1_max, double sar_max, double tr,
                                    const std::string &design_g, double smax, double gmax,
                                    bool g_end)
{
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    if (r.ndim() != 2 || r.shape(1) != 3)
        raise_status(PS_ERR_SIZE, "r: expected shape [Ns,3], got " + shape_str(r));
    if (g.ndim() != 2 || g.shape(1) != 3)
        raise_status(PS_ERR_SIZE, "g: expected shape [Nt,3], got " + shape_str(g));
    size_t ns = r.shape(0), nt = g.shape(0), nc = 1, nq = 0;
    if (b1map) {
        if (b1map->ndim() != 3 || b1map->shape(0) != ns || b1map->shape(2) != 2)
            raise_status(PS_ERR_SIZE, "b1map: expected shape [Ns,Nc,2] with Ns = " +
                                          std::to_string(ns) + ", got " + shape_str(*b1map));
        nc = b1map->shape(1);
    }
    if (vop) {
        if (vop->ndim() != 4 || vop->shape(1) != nc || vop->shape(2) != nc || vop->shape(3) != 2)
            raise_status(PS_ERR_SIZE, "vop: expected shape [Nq,Nc,Nc,2] with Nc = " +
                                          std::to_string(nc) + ", got " + shape_str(*vop));
        nq = vop->shape(0);
    }
    check_shape("target", target, {ns, 3});
    d.ns = ns;
    d.nt = nt;
    d.nc = nc;
    d.nq = nq;
    d.r = r.data();
    d.target = target.data();
    d.g = g.data();
    d.dt = dt;
    auto vec = [&](const char *name, const opt_array &a, std::vector<size_t> shape) {
        if (!a)
            return (const double *)nullptr;
        check_shape(name, *a, shape);
        return a->data();
    };
    d.df = vec("df", df, {ns});
    d.b1scale = vec("b1scale", b1scale, {ns});
    d.w = vec("w", w, {ns});
    d.m0 = vec("m0", m0, {ns, 3});
    d.t1 = vec("t1", t1, {ns});
    d.t2 = vec("t2", t2, {ns});
    d.b1map = b1map ? b1map->data() : nullptr;
    if (b1 && b1->ndim() == 2 && nc == 1)
        d.b1 = vec("b1", b1, {nt, 2});
    else
        d.b1 = vec("b1", b1, {nc, nt, 2});
    d.vop = vop ? vop->data() : nullptr;
    d.rf_mask = vec("rf_mask", rf_mask, {nt});
    d.b1_max_channel = vec("b1_max", b1_max_channel, {nc});
    if (gamma_bar != 0.0) // 0: the default
        d.gamma_bar = gamma_bar;
    d.lambda = lambda;
    int st = ps_loss_parse(loss.c_str(), &d.loss);
    if (st != 0)
        raise_status(st, "loss: '" + loss + "' is not full, xy, mls or z");
    d.b1_max = b1_max ? *b1_max : PS_B1MAX_NONE;
    d.sar_max = sar_max;
    d.tr = tr;
    if (!design_g.empty()) {
        st = ps_design_g_parse(design_g.c_str(), &d.design_g);
        if (st != 0)
            raise_status(st, "design_g: '" + design_g +
                                 "' is not a set of the axes x, y, z in that order");
    }
    d.smax = smax;
    d.gmax = gmax;
    d.g_end = g_end ? 1 : 0;

    char msg[512] = "";
    ps_problem *p = nullptr;
    {
        nb::gil_scoped_release rel;
        st = ps_problem_validate(&d, msg, sizeof msg);
        if (st == 0)
            st = ps_problem_create(&d, &p);
    }
    check(st, msg);
    return new Problem(p);
}

static Problem *problem_preset(const std::string &spec)
{
    char err[512] = "";
    ps_problem *p = nullptr;
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_preset_create(spec.c_str(), &p, err, sizeof err);
    }
    check(st, err);
    return new Problem(p);
}

static Problem *problem_read(const std::string &path)
{
    char err[1024] = "";
    ps_problem *p = nullptr;
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_h5_read_problem(path.c_str(), &p, err, sizeof err);
    }
    check(st, err);
    return new Problem(p);
}

// The problem's arrays as read-only views (owner: the Problem) and scalars.
static nb::dict problem_describe(nb::handle self_h)
{
    Problem &self = nb::cast<Problem &>(self_h);
    ps_problem_desc d;
    check(ps_problem_describe(self.p, &d));
    size_t ns = d.ns, nt = d.nt, nc = ps_problem_nc(self.p), nq = d.nq;
    nb::dict out;
    auto put = [&](const char *name, const double *ptr, std::initializer_list<size_t> shape) {
        if (ptr)
            out[name] = view_array(ptr, shape, self_h);
        else
            out[name] = nb::none();
    };
    put("r", d.r, {ns, 3});
    put("target", d.target, {ns, 3});
    put("df", d.df, {ns});
    put("b1scale", d.b1scale, {ns});
    put("w", d.w, {ns});
    put("m0", d.m0, {ns, 3});
    put("t1", d.t1, {ns});
    put("t2", d.t2, {ns});
    put("b1map", d.b1map, {ns, nc, 2});
    put("g", d.g, {nt, 3});
    put("b1", d.b1, {nc, nt, 2});
    put("vop", nq ? d.vop : nullptr, {nq, nc, nc, 2});
    put("rf_mask", d.rf_mask, {nt});
    put("b1_max_channel", d.b1_max_channel, {nc});
    out["ns"] = ns;
    out["nt"] = nt;
    out["nc"] = nc;
    out["nq"] = nq;
    out["dt"] = d.dt;
    out["gamma_bar"] = d.gamma_bar;
    out["lambda"] = d.lambda;
    out["loss"] = std::string(ps_loss_name(d.loss) ? ps_loss_name(d.loss) : "");
    out["b1_max"] = d.b1_max;
    out["sar_max"] = d.sar_max;
    out["tr"] = d.tr;
    char axes[8] = "";
    ps_design_g_name(d.design_g, axes, sizeof axes);
    out["design_g"] = std::string(axes);
    out["smax"] = d.smax;
    out["gmax"] = d.gmax;
    out["g_end"] = d.g_end != 0;
    return out;
}

static out_array problem_x0(const Problem &self)
{
    out_array x = new_array({self.nx()});
    check(ps_problem_x0(self.p, x.data()));
    return x;
}

static void problem_write(const Problem &self, const std::string &path)
{
    char err[1024] = "";
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_h5_write_problem(path.c_str(), self.p, err, sizeof err);
    }
    check(st, err);
}

// A point x of the problem: its length checked.
static const double *point(const Problem &p, const in_array &x, const char *name = "x")
{
    if (x.ndim() != 1 || x.shape(0) != p.nx())
        raise_status(PS_ERR_SIZE, std::string(name) + ": expected shape [" +
                                      std::to_string(p.nx()) + "] (ps_problem_nx), got " +
                                      shape_str(x));
    return x.data();
}

// ---- evaluation -----------------------------------------------------------

static nb::tuple evaluate(const Problem &p, const in_array &x, const nb::dict &kw, bool want_g)
{
    options opt;
    set_options(opt, kw);
    const double *xp = point(p, x);
    out_array grad = new_array({p.nx()});
    std::optional<out_array> grad_g;
    double f = NAN;
    int st;
    if (want_g) {
        grad_g = new_array({ps_problem_nt(p.p), 3});
        nb::gil_scoped_release rel;
        st = ps_eval_g(p.p, &opt.o, xp, &f, grad.data(), grad_g->data());
    } else {
        nb::gil_scoped_release rel;
        st = ps_eval(p.p, &opt.o, xp, &f, grad.data());
    }
    check(st, opt.log.take());
    if (grad_g)
        return nb::make_tuple(f, grad, *grad_g);
    return nb::make_tuple(f, grad, nb::none());
}

static out_array simulate(const Problem &p, const in_array &x, const nb::dict &kw)
{
    options opt;
    set_options(opt, kw);
    const double *xp = point(p, x);
    out_array m = new_array({ps_problem_ns(p.p), 3});
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_simulate(p.p, &opt.o, xp, m.data());
    }
    check(st, opt.log.take());
    return m;
}

static nb::dict constraints(const Problem &p, const in_array &x)
{
    const double *xp = point(p, x);
    size_t nc = ps_problem_nc(p.p), nq = ps_problem_nq(p.p);
    out_array peak = new_array({nc});
    out_array sar = new_array({nq});
    check(ps_constraints(p.p, xp, peak.data(), nq ? sar.data() : nullptr));
    out_array gpeak = new_array({3}), slew = new_array({3}), gend = new_array({3});
    check(ps_gradient_constraints(p.p, xp, gpeak.data(), slew.data(), gend.data()));
    nb::dict out;
    out["peak_b1"] = peak;
    out["sar"] = sar;
    out["peak_g"] = gpeak;
    out["peak_slew"] = slew;
    out["end_g"] = gend;
    return out;
}

// ---- runs -----------------------------------------------------------------

static nb::dict progress_dict(const ps_progress &h)
{
    nb::dict d;
    d["iteration"] = h.iteration;
    d["f"] = h.f;
    d["gnorm"] = h.gnorm;
    d["step"] = h.step;
    d["evaluations"] = h.evaluations;
    d["seconds"] = h.seconds;
    d["round"] = h.round;
    return d;
}

struct Run {
    ps_run *run = nullptr;
    nb::object problem;   // keeps the borrowed problem alive
    options opt;          // the log sink and the GPU options outlive the run
    nb::object callback;  // progress callback (None: none)
    nb::object cb_error;  // an exception the callback raised
    std::mutex cb_lock;

    Run() = default;
    Run(const Run &) = delete;
    Run &operator=(const Run &) = delete;
    ~Run() { close(); }

    void close()
    {
        if (run) {
            ps_run *r = run;
            run = nullptr;
            nb::gil_scoped_release rel; // the worker may wait for the GIL in the callback
            ps_run_free(r);
        }
    }

    ps_run *get() const
    {
        if (!run)
            raise_status(PS_ERR_STATE, "the run is closed");
        return run;
    }

    static int progress_fn(void *user, const ps_progress *pr)
    {
        Run *self = static_cast<Run *>(user);
        nb::gil_scoped_acquire gil;
        try {
            nb::object r = self->callback(progress_dict(*pr));
            return nb::bool_(r) ? 1 : 0;
        } catch (nb::python_error &e) {
            self->cb_error = nb::borrow(e.value());
            return 1; // cancel: the error is raised by wait()
        }
    }

    void setup(nb::handle prob, const nb::dict &kw, nb::object cb)
    {
        problem = nb::borrow(prob);
        set_options(opt, kw);
        if (!cb.is_none()) {
            callback = cb;
            opt.o.progress = progress_fn;
            opt.o.progress_user = this;
        }
    }
};

static Run *run_start(nb::handle prob, const in_array &x0, const nb::dict &kw, nb::object cb)
{
    const Problem &p = nb::cast<const Problem &>(prob);
    const double *xp = point(p, x0, "x0");
    Run *r = new Run();
    try {
        r->setup(prob, kw, cb);
        int st;
        {
            nb::gil_scoped_release rel;
            st = ps_solve_start(p.p, &r->opt.o, xp, &r->run);
        }
        check(st, r->opt.log.take());
    } catch (...) {
        delete r;
        throw;
    }
    return r;
}

static Run *run_resume(nb::handle prob, nb::bytes blob, const nb::dict &kw, nb::object cb)
{
    const Problem &p = nb::cast<const Problem &>(prob);
    Run *r = new Run();
    try {
        r->setup(prob, kw, cb);
        int st;
        const void *buf = blob.c_str();
        size_t len = blob.size();
        {
            nb::gil_scoped_release rel;
            st = ps_solve_resume(p.p, &r->opt.o, buf, len, &r->run);
        }
        check(st, r->opt.log.take());
    } catch (...) {
        delete r;
        throw;
    }
    return r;
}

static nb::dict snapshot_dict(const ps_snapshot &s)
{
    nb::dict d;
    d["sequence"] = s.sequence;
    d["iteration"] = s.iteration;
    d["f"] = s.f;
    d["gnorm"] = s.gnorm;
    d["step"] = s.step;
    d["evaluations"] = s.evaluations;
    d["seconds"] = s.seconds;
    d["heartbeat"] = s.heartbeat;
    d["state"] = s.state;
    d["phase"] = s.phase;
    d["status"] = s.status;
    d["round"] = s.round;
    d["idle"] = s.idle != 0;
    return d;
}

static nb::dict run_snapshot(const Run &r)
{
    ps_snapshot s;
    check(ps_run_snapshot(r.get(), &s));
    return snapshot_dict(s);
}

static void run_control(Run &r, int (*fn)(ps_run *))
{
    ps_run *run = r.get();
    int st;
    {
        nb::gil_scoped_release rel;
        st = fn(run);
    }
    check(st, r.opt.log.take());
}

static nb::dict result_dict(const ps_result &res, const out_array &x, const std::string &message);

// The finished run's outcome as a dict (x, history [rows,7], the ps_result
// fields and the log's last message; the Python layer raises for the
// statuses that leave no point), or None when timeout_s passed first.
static nb::object run_wait(Run &r, double timeout_s, nb::handle prob)
{
    ps_run *run = r.get();
    const Problem &p = nb::cast<const Problem &>(prob);
    out_array x = new_array({p.nx()});
    ps_result res;
    std::memset(&res, 0, sizeof res);
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_run_wait(run, timeout_s, &res, x.data());
    }
    if (r.cb_error.is_valid() && st != PS_RUNNING) {
        ps_result_free(&res);
        nb::object e = r.cb_error;
        r.cb_error = nb::object();
        PyErr_SetObject((PyObject *)Py_TYPE(e.ptr()), e.ptr());
        throw nb::python_error();
    }
    if (st == PS_RUNNING)
        return nb::none();
    nb::dict d = result_dict(res, x, r.opt.log.take());
    ps_result_free(&res);
    return d;
}

// A finished solve's outcome as a dict: x, history [rows,7], the ps_result
// fields and the log's last message.
static nb::dict result_dict(const ps_result &res, const out_array &x, const std::string &message)
{
    out_array hist = new_array({res.history_len, 7});
    for (size_t i = 0; i < res.history_len; i++) {
        const ps_progress &h = res.history[i];
        double *row = hist.data() + 7 * i;
        row[0] = (double)h.iteration;
        row[1] = h.f;
        row[2] = h.gnorm;
        row[3] = h.step;
        row[4] = (double)h.evaluations;
        row[5] = h.seconds;
        row[6] = (double)h.round;
    }
    nb::dict d;
    d["status"] = res.status;
    d["iterations"] = res.iterations;
    d["evaluations"] = res.evaluations;
    d["f"] = res.f;
    d["gnorm"] = res.gnorm;
    d["seconds"] = res.seconds;
    d["kernel_seconds"] = res.kernel_seconds;
    d["backend"] = res.backend == PS_BACKEND_GPU ? "gpu" : "cpu";
    d["fell_back"] = res.fell_back != 0;
    d["device"] = std::string(res.device);
    d["rounds"] = res.rounds;
    d["mu"] = res.mu;
    d["violation"] = res.violation;
    d["history"] = hist;
    d["x"] = x;
    d["message"] = message;
    return d;
}

static nb::bytes run_checkpoint(Run &r)
{
    ps_run *run = r.get();
    void *buf = nullptr;
    size_t len = 0;
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_run_checkpoint(run, &buf, &len);
    }
    check(st, r.opt.log.take());
    nb::bytes b(static_cast<const char *>(buf), len);
    std::free(buf);
    return b;
}

// ---- batches --------------------------------------------------------------

// A batch (ps_batch_*): the problems it borrows are kept alive here.
struct Batch {
    ps_batch *b = nullptr;
    std::vector<nb::object> problems; // the Problem of every index
    options opt;                       // the log sink and the GPU options outlive the batch

    Batch() = default;
    Batch(const Batch &) = delete;
    Batch &operator=(const Batch &) = delete;
    ~Batch() { close(); }

    void close()
    {
        if (b) {
            ps_batch *q = b;
            b = nullptr;
            nb::gil_scoped_release rel;
            ps_batch_free(q);
        }
    }

    ps_batch *get() const
    {
        if (!b)
            raise_status(PS_ERR_STATE, "the batch is closed");
        return b;
    }
};

static size_t batch_index(const std::optional<size_t> &i)
{
    return i ? *i : PS_BATCH_ALL;
}

static Batch *batch_create(const nb::dict &kw)
{
    Batch *bt = new Batch();
    try {
        set_options(bt->opt, kw);
        int st;
        {
            nb::gil_scoped_release rel;
            st = ps_batch_create(&bt->opt.o, &bt->b);
        }
        check(st, bt->opt.log.take());
    } catch (...) {
        delete bt;
        throw;
    }
    return bt;
}

// Add a problem; returns (index, status): a problem the batch cannot run
// is still added with its own error status (raised by result()), any
// other failure raises here.
static nb::tuple batch_add(Batch &bt, nb::handle prob, std::optional<in_array> x0)
{
    ps_batch *b = bt.get();
    const Problem &p = nb::cast<const Problem &>(prob);
    const double *xp = x0 ? point(p, *x0, "x0") : nullptr;
    size_t before = ps_batch_size(b), index = 0;
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_batch_add(b, p.p, xp, &index);
    }
    if (ps_batch_size(b) == before)
        check(st < 0 ? st : PS_ERR_STATE, bt.opt.log.take());
    else
        index = before;
    bt.problems.push_back(nb::borrow(prob));
    return nb::make_tuple(index, st);
}

static Batch *batch_restore(nb::bytes blob, nb::list probs, const nb::dict &kw)
{
    std::vector<const ps_problem *> ps;
    Batch *bt = new Batch();
    try {
        for (nb::handle h : probs) {
            ps.push_back(nb::cast<const Problem &>(h).p);
            bt->problems.push_back(nb::borrow(h));
        }
        set_options(bt->opt, kw);
        const void *buf = blob.c_str();
        size_t len = blob.size();
        int st;
        {
            nb::gil_scoped_release rel;
            st = ps_batch_restore(&bt->opt.o, ps.data(), ps.size(), buf, len, &bt->b);
        }
        check(st, bt->opt.log.take());
    } catch (...) {
        delete bt;
        throw;
    }
    return bt;
}

static nb::dict batch_progress(const Batch &bt)
{
    ps_batch_report r;
    check(ps_batch_progress(bt.get(), &r));
    nb::dict d;
    d["problems"] = r.problems;
    d["queued"] = r.queued;
    d["running"] = r.running;
    d["paused"] = r.paused;
    d["finished"] = r.finished;
    d["failed"] = r.failed;
    d["slowest_iteration"] = r.slowest_iteration;
    d["iterations"] = r.iterations;
    d["seconds"] = r.seconds;
    d["state"] = r.state;
    d["teams"] = r.teams;
    d["team_blocks"] = r.team_blocks;
    d["setup_seconds"] = r.setup_seconds;
    d["kernel_seconds"] = r.kernel_seconds;
    d["team_barrier"] = r.team_barrier;
    d["block"] = r.block;
    return d;
}

static nb::dict batch_snapshot(const Batch &bt, size_t i)
{
    ps_snapshot s;
    check(ps_batch_snapshot(bt.get(), i, &s), "problem " + std::to_string(i) + " out of range");
    return snapshot_dict(s);
}

static void batch_control(Batch &bt, int (*fn)(ps_batch *, size_t), std::optional<size_t> i)
{
    ps_batch *b = bt.get();
    size_t idx = batch_index(i);
    int st;
    {
        nb::gil_scoped_release rel;
        st = fn(b, idx);
    }
    check(st, bt.opt.log.take());
}

// True when every problem has finished, False when timeout_s passed first.
static bool batch_wait(Batch &bt, double timeout_s)
{
    ps_batch *b = bt.get();
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_batch_wait(b, timeout_s);
    }
    if (st == PS_RUNNING)
        return false;
    check(st, bt.opt.log.take());
    return true;
}

static void batch_call(Batch &bt, int (*fn)(ps_batch *))
{
    ps_batch *b = bt.get();
    int st;
    {
        nb::gil_scoped_release rel;
        st = fn(b);
    }
    check(st, bt.opt.log.take());
}

static nb::bytes batch_checkpoint(Batch &bt)
{
    ps_batch *b = bt.get();
    void *buf = nullptr;
    size_t len = 0;
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_batch_checkpoint(b, &buf, &len);
    }
    check(st, bt.opt.log.take());
    nb::bytes out(static_cast<const char *>(buf), len);
    std::free(buf);
    return out;
}

// The options that force a solo solve to problem i's shape (ps_batch_shape),
// keyed as the options of design().
static nb::dict batch_shape(Batch &bt, size_t i)
{
    ps_gpu_options g;
    int threads = 0;
    check(ps_batch_shape(bt.get(), i, &g, &threads), bt.opt.log.take());
    nb::dict d;
    d["tune_cache"] = g.tune_cache;
    d["gpu_block"] = g.gpu_block;
    d["gpu_spins_per_tile"] = g.gpu_spins_per_tile;
    d["gpu_max_registers"] = g.gpu_max_registers;
    d["gpu_blocks_per_sm"] = g.gpu_blocks_per_sm;
    d["gpu_grid"] = g.gpu_grid;
    d["gpus"] = g.gpus;
    d["threads"] = threads;
    return d;
}

// Problem i's outcome as run_wait gives a run's, or None while it runs.
static nb::object batch_result(Batch &bt, size_t i)
{
    ps_batch *b = bt.get();
    if (i >= bt.problems.size())
        raise_status(PS_ERR_SIZE, "problem " + std::to_string(i) + " out of range (" +
                                      std::to_string(bt.problems.size()) + " problems)");
    const Problem &p = nb::cast<const Problem &>(bt.problems[i]);
    out_array x = new_array({p.nx()});
    ps_result res;
    std::memset(&res, 0, sizeof res);
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_batch_result(b, i, &res, x.data());
    }
    if (st == PS_RUNNING) {
        ps_result_free(&res);
        return nb::none();
    }
    nb::dict d = result_dict(res, x, bt.opt.log.take());
    d["status"] = st;
    ps_result_free(&res);
    return d;
}

// ---- files ----------------------------------------------------------------

static void write_result(const std::string &path, const Problem &p, const in_array &x,
                         const in_array &m, const in_array &history, int status,
                         int64_t iterations, int64_t evaluations, double f, double gnorm,
                         double seconds, const std::string &backend, const std::string &device,
                         int rounds, double mu, double violation)
{
    const double *xp = point(p, x);
    check_shape("m", m, {ps_problem_ns(p.p), 3});
    if (history.ndim() != 2 || history.shape(1) != 7)
        raise_status(PS_ERR_SIZE, "history: expected shape [rows,7], got " + shape_str(history));
    std::vector<ps_progress> rows(history.shape(0));
    for (size_t i = 0; i < rows.size(); i++) {
        const double *h = history.data() + 7 * i;
        rows[i] = ps_progress{(int64_t)h[0], h[1], h[2], h[3], (int64_t)h[4], h[5],
                              (int32_t)h[6], 0};
    }
    ps_result r;
    std::memset(&r, 0, sizeof r);
    r.status = status;
    r.iterations = iterations;
    r.evaluations = evaluations;
    r.f = f;
    r.gnorm = gnorm;
    r.seconds = seconds;
    r.backend = backend == "gpu" ? PS_BACKEND_GPU : PS_BACKEND_CPU;
    std::snprintf(r.device, sizeof r.device, "%s", device.c_str());
    r.history = rows.data();
    r.history_len = rows.size();
    r.rounds = rounds;
    r.mu = mu;
    r.violation = violation;
    char err[1024] = "";
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_h5_write_result(path.c_str(), p.p, xp, m.data(), &r, err, sizeof err);
    }
    check(st, err);
}

static out_array read_x(const std::string &path, const Problem &p)
{
    out_array x = new_array({p.nx()});
    char err[1024] = "";
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_h5_read_x(path.c_str(), p.p, x.data(), err, sizeof err);
    }
    check(st, err);
    return x;
}

// ---- Pulseq ---------------------------------------------------------------

static std::vector<std::string> pulseq_write(const std::string &path, const Problem &p,
                                             const in_array &x)
{
    const double *xp = point(p, x);
    char err[1024] = "";
    int st;
    {
        nb::gil_scoped_release rel;
        st = ps_pulseq_export(path.c_str(), p.p, xp, err, sizeof err);
    }
    check(st, err);
    std::vector<std::string> files;
    size_t nc = ps_problem_nc(p.p);
    for (size_t c = 0; c < nc; c++) {
        char name[4200];
        check(ps_pulseq_channel_path(path.c_str(), c, nc, name, sizeof name),
              "output name too long");
        files.emplace_back(name);
    }
    return files;
}

static out_array pulseq_resample(const in_array &w, double dt, double raster)
{
    if (w.ndim() != 1)
        raise_status(PS_ERR_SIZE, "w: expected one dimension, got " + shape_str(w));
    size_t n = ps_pulseq_raster_count(w.shape(0), dt, raster);
    if (n == 0)
        raise_status(PS_ERR_DT, "dt and the raster must be positive and finite");
    out_array out = new_array({n});
    check(ps_pulseq_resample(w.data(), w.shape(0), dt, raster, out.data(), n));
    return out;
}

// ---- module ---------------------------------------------------------------

NB_MODULE(_persolve, m)
{
    m.doc() = "persolve's C API (the persolve package wraps it; use that)";

    m.def("version", []() { return std::string(ps_version()); });
    m.def("strerror", [](int st) { return std::string(ps_strerror(st)); });
    m.def("have_cuda", []() { return ps_have_cuda() != 0; });
    m.def("have_openmp", []() { return ps_have_openmp() != 0; });
    m.def("gpu_count", []() { return ps_gpu_count(); });
    m.def("gpu_describe", [](int i) {
        char buf[256] = "";
        check(ps_gpu_describe(i, buf, sizeof buf));
        return std::string(buf);
    });
    m.def("preset_names", []() {
        std::vector<std::string> v;
        for (const char *const *n = ps_preset_names(); *n; n++)
            v.emplace_back(*n);
        return v;
    });
    m.def("options_default", []() {
        ps_options o;
        ps_options_default(&o);
        nb::dict d;
        d["backend"] = "auto";
        d["precision"] = "single";
        d["memory"] = o.memory;
        d["max_iterations"] = o.max_iterations;
        d["max_evaluations"] = o.max_evaluations;
        d["time_limit"] = o.time_limit;
        d["gtol"] = o.gtol;
        d["ftol"] = o.ftol;
        d["past"] = o.past;
        d["c1"] = o.c1;
        d["c2"] = o.c2;
        d["max_linesearch"] = o.max_linesearch;
        d["fnoise"] = o.fnoise;
        d["threads"] = o.threads;
        d["max_rounds"] = o.max_rounds;
        d["constraint_tol"] = o.constraint_tol;
        d["penalty_mu"] = o.penalty_mu;
        return d;
    });
    m.def("check_options", [](const nb::dict &kw) {
        options opt;
        set_options(opt, kw);
    });

    nb::class_<Problem>(m, "Problem")
        .def_static("from_arrays", &problem_from_arrays, "r"_a, "target"_a, "g"_a, "dt"_a,
                    "df"_a = nb::none(), "b1scale"_a = nb::none(), "w"_a = nb::none(),
                    "m0"_a = nb::none(), "t1"_a = nb::none(), "t2"_a = nb::none(),
                    "b1map"_a = nb::none(), "b1"_a = nb::none(), "vop"_a = nb::none(),
                    "rf_mask"_a = nb::none(), "b1_max_channel"_a = nb::none(),
                    "gamma_bar"_a = 0.0, "lambda_"_a = 0.0, "loss"_a = "full",
                    "b1_max"_a = nb::none(), "sar_max"_a = 0.0, "tr"_a = 0.0,
                    "design_g"_a = "", "smax"_a = 0.0, "gmax"_a = 0.0, "g_end"_a = false,
                    nb::rv_policy::take_ownership)
        .def_static("preset", &problem_preset, "spec"_a, nb::rv_policy::take_ownership)
        .def_static("read", &problem_read, "path"_a, nb::rv_policy::take_ownership)
        .def("describe", [](nb::handle self) { return problem_describe(self); })
        .def("x0", &problem_x0)
        .def("write", &problem_write, "path"_a)
        .def_prop_ro("ns", [](const Problem &p) { return ps_problem_ns(p.p); })
        .def_prop_ro("nt", [](const Problem &p) { return ps_problem_nt(p.p); })
        .def_prop_ro("nc", [](const Problem &p) { return ps_problem_nc(p.p); })
        .def_prop_ro("nq", [](const Problem &p) { return ps_problem_nq(p.p); })
        .def_prop_ro("nx", [](const Problem &p) { return ps_problem_nx(p.p); })
        .def_prop_ro("penalized", [](const Problem &p) { return ps_problem_penalized(p.p) != 0; });

    m.def("evaluate", &evaluate, "problem"_a, "x"_a, "options"_a, "gradient_g"_a);
    m.def("simulate", &simulate, "problem"_a, "x"_a, "options"_a);
    m.def("constraints", &constraints, "problem"_a, "x"_a);

    nb::class_<Run>(m, "Run")
        .def_static("start", &run_start, "problem"_a, "x0"_a, "options"_a,
                    "callback"_a = nb::none(), nb::rv_policy::take_ownership)
        .def_static("resume_from", &run_resume, "problem"_a, "blob"_a, "options"_a,
                    "callback"_a = nb::none(), nb::rv_policy::take_ownership)
        .def("snapshot", &run_snapshot)
        .def("pause", [](Run &r) { run_control(r, ps_run_pause); })
        .def("resume", [](Run &r) { run_control(r, ps_run_resume); })
        .def("cancel", [](Run &r) { run_control(r, ps_run_cancel); })
        .def("yield_", [](Run &r) { run_control(r, ps_run_yield); })
        .def("wait", [](Run &r, double t) { return run_wait(r, t, r.problem); }, "timeout"_a)
        .def("checkpoint", &run_checkpoint)
        .def("close", &Run::close);

    nb::class_<Batch>(m, "Batch")
        .def_static("create", &batch_create, "options"_a, nb::rv_policy::take_ownership)
        .def_static("restore", &batch_restore, "blob"_a, "problems"_a, "options"_a,
                    nb::rv_policy::take_ownership)
        .def("add", &batch_add, "problem"_a, "x0"_a = nb::none())
        .def("start", [](Batch &bt) { batch_call(bt, ps_batch_start); })
        .def("progress", &batch_progress)
        .def("snapshot", &batch_snapshot, "i"_a)
        .def("pause", [](Batch &bt, std::optional<size_t> i) { batch_control(bt, ps_batch_pause, i); },
             "i"_a = nb::none())
        .def("resume", [](Batch &bt, std::optional<size_t> i) { batch_control(bt, ps_batch_resume, i); },
             "i"_a = nb::none())
        .def("cancel", [](Batch &bt, std::optional<size_t> i) { batch_control(bt, ps_batch_cancel, i); },
             "i"_a = nb::none())
        .def("wait", &batch_wait, "timeout"_a)
        .def("yield_", [](Batch &bt) { batch_call(bt, ps_batch_yield); })
        .def("checkpoint", &batch_checkpoint)
        .def("result", &batch_result, "i"_a)
        .def("shape", &batch_shape, "i"_a)
        .def("size", [](const Batch &bt) { return ps_batch_size(bt.get()); })
        .def("close", &Batch::close);

    m.def("write_result", &write_result, "path"_a, "problem"_a, "x"_a, "m"_a, "history"_a,
          "status"_a, "iterations"_a, "evaluations"_a, "f"_a, "gnorm"_a, "seconds"_a,
          "backend"_a, "device"_a, "rounds"_a, "mu"_a, "violation"_a);
    m.def("read_x", &read_x, "path"_a, "problem"_a);
    m.def("pulseq_write", &pulseq_write, "path"_a, "problem"_a, "x"_a);
    m.def("pulseq_resample", &pulseq_resample, "w"_a, "dt"_a, "raster"_a);
}
