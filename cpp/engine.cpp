// The backward engine's two hot loops in C++ (minitorch_dist/autograd.py keeps the Python
// twins, which run where the extension is not built and serve as the oracle in
// python_tests/test_native_engine.py):
//
//   topological_order(roots, InputLink)  the nodes reachable from roots, consumers first
//   backward_nodes(...)                  every node's backward, its input gradients delivered
//
// Both work on Python objects through the CPython API, with the GIL held: what they save is
// the interpreter's dispatch of a few hundred bytecodes a node, not arithmetic. Every step
// is the Python twin's, in the same order (the same gradients, summed in the same order,
// the same errors); anything off the common path (a multi-output node, a gradient to fit
// or to sum with a RowTensor) calls the twin's Python helper.
#include <Python.h>
#include <time.h>

#include <utility>
#include <vector>

#include "kernels.h"

namespace mtd {
namespace {

namespace py = pybind11;

// Attribute names, interned once.
struct Names {
    PyObject *grad_fn, *requires_grad, *links, *tensor, *ctx, *prim, *out_meta, *xp, *ndarray,
        *backward, *backward_time, *data, *shape, *dtype, *device, *out_index, *name;
};
Names names;

PyObject* intern(const char* s) { return PyUnicode_InternFromString(s); }

void init_names() {
    if (names.grad_fn != nullptr) return;
    names = Names{intern("grad_fn"),  intern("requires_grad"), intern("_links"),
                  intern("tensor"),   intern("ctx"),           intern("prim"),
                  intern("out_meta"), intern("xp"),            intern("ndarray"),
                  intern("backward"), intern("backward_time"), intern("data"),
                  intern("shape"),    intern("dtype"),         intern("device"),
                  intern("_out_index"), intern("name")};
}

// An owned reference that releases itself.
struct Ref {
    PyObject* p = nullptr;
    Ref() = default;
    explicit Ref(PyObject* o) : p(o) {}
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    Ref(Ref&& o) noexcept : p(o.p) { o.p = nullptr; }
    Ref& operator=(Ref&& o) noexcept {
        std::swap(p, o.p);
        return *this;
    }
    ~Ref() { Py_XDECREF(p); }
    PyObject* get() const { return p; }
    PyObject* release() {
        PyObject* o = p;
        p = nullptr;
        return o;
    }
    explicit operator bool() const { return p != nullptr; }
};

[[noreturn]] void raise_pending() { throw py::error_already_set(); }

PyObject* check(PyObject* o) {
    if (o == nullptr) raise_pending();
    return o;
}

Ref attr(PyObject* o, PyObject* name) { return Ref(check(PyObject_GetAttr(o, name))); }

bool truthy(PyObject* o) {
    int r = PyObject_IsTrue(o);
    if (r < 0) raise_pending();
    return r == 1;
}

// Node.inputs: each link resolved to its tensor while the tensor lives.
Ref resolved_inputs(PyObject* node, PyObject* link_type) {
    Ref links = attr(node, names.links);
    if (!PyTuple_Check(links.get())) throw py::type_error("Node._links must be a tuple");
    Py_ssize_t n = PyTuple_GET_SIZE(links.get());
    Ref out(check(PyTuple_New(n)));
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = PyTuple_GET_ITEM(links.get(), i);
        PyObject* chosen = item;
        Ref live;
        if (Py_TYPE(item) == reinterpret_cast<PyTypeObject*>(link_type)) {
            Ref weak = attr(item, names.tensor);
            live = Ref(check(PyObject_CallNoArgs(weak.get())));
            if (live.get() != Py_None) chosen = live.get();
        }
        Py_INCREF(chosen);
        PyTuple_SET_ITEM(out.get(), i, chosen);
    }
    return out;
}

// _topological_order's twin: (nodes, inputs, leaf ids).
py::tuple topological_order(py::iterable roots, py::object link_type) {
    init_names();
    Ref order(check(PyList_New(0))), order_inputs(check(PyList_New(0)));
    Ref seen(check(PySet_New(nullptr))), leaf_ids(check(PySet_New(nullptr)));
    std::vector<std::pair<Ref, Ref>> stack;     // (node, its inputs once its consumers are done)
    for (py::handle root : roots) {
        Ref top = attr(root.ptr(), names.grad_fn);
        if (top.get() == Py_None) continue;
        int s = PySet_Contains(seen.get(), top.get());
        if (s < 0) raise_pending();
        if (s) continue;
        stack.clear();
        stack.emplace_back(std::move(top), Ref());
        while (!stack.empty()) {
            Ref node = std::move(stack.back().first), inputs = std::move(stack.back().second);
            stack.pop_back();
            if (inputs) {       // every consumer's subtree is done: list it
                if (PyList_Append(order.get(), node.get()) < 0 ||
                    PyList_Append(order_inputs.get(), inputs.get()) < 0)
                    raise_pending();
                continue;
            }
            s = PySet_Contains(seen.get(), node.get());
            if (s < 0) raise_pending();
            if (s) continue;
            if (PySet_Add(seen.get(), node.get()) < 0) raise_pending();
            inputs = resolved_inputs(node.get(), link_type.ptr());
            PyObject* tuple = inputs.get();
            Py_INCREF(node.get());
            Py_INCREF(tuple);
            stack.emplace_back(Ref(node.get()), Ref(tuple));
            for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(tuple); i < n; ++i) {
                PyObject* inp = PyTuple_GET_ITEM(tuple, i);
                if (inp == Py_None) continue;
                Ref producer = attr(inp, names.grad_fn);
                if (producer.get() == Py_None) {
                    Ref wants = attr(inp, names.requires_grad);
                    if (truthy(wants.get())) {
                        Ref id(check(PyLong_FromVoidPtr(inp)));
                        if (PySet_Add(leaf_ids.get(), id.get()) < 0) raise_pending();
                    }
                } else {
                    s = PySet_Contains(seen.get(), producer.get());
                    if (s < 0) raise_pending();
                    if (!s) stack.emplace_back(std::move(producer), Ref());
                }
            }
        }
    }
    if (PyList_Reverse(order.get()) < 0 || PyList_Reverse(order_inputs.get()) < 0) raise_pending();
    return py::reinterpret_steal<py::tuple>(
        check(PyTuple_Pack(3, order.get(), order_inputs.get(), leaf_ids.get())));
}

double seconds_now() {      // time.perf_counter's clock
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// What backward_nodes is given besides the graph: the twin's helpers and types.
struct Helpers {
    PyObject *numpy, *ndarray, *link_type, *fit, *accumulate, *output_gradients;
};

// _accumulate(total, grad): two host arrays are added here, anything else in Python.
Ref accumulate(const Helpers& h, PyObject* total, PyObject* grad) {
    if (Py_TYPE(total) == reinterpret_cast<PyTypeObject*>(h.ndarray) &&
        Py_TYPE(grad) == reinterpret_cast<PyTypeObject*>(h.ndarray))
        return Ref(check(PyNumber_Add(total, grad)));
    return Ref(check(PyObject_CallFunctionObjArgs(h.accumulate, total, grad, nullptr)));
}

// _deliver's twin.
void deliver(const Helpers& h, PyObject* tensor, PyObject* grad, PyObject* pending,
             PyObject* leaves, PyObject* target_ids) {
    Ref producer = attr(tensor, names.grad_fn);
    bool leaf = producer.get() == Py_None;
    if (!leaf && target_ids != Py_None) {
        Ref id(check(PyLong_FromVoidPtr(tensor)));
        int s = PySet_Contains(target_ids, id.get());
        if (s < 0) raise_pending();
        leaf = s == 1;
    }
    if (leaf) {
        Ref id(check(PyLong_FromVoidPtr(tensor)));
        PyObject* entry = PyDict_GetItemWithError(leaves, id.get());    // borrowed
        if (entry == nullptr) {
            if (PyErr_Occurred()) raise_pending();
            Ref pair(check(PyList_New(2)));
            Py_INCREF(tensor);
            Py_INCREF(grad);
            PyList_SET_ITEM(pair.get(), 0, tensor);
            PyList_SET_ITEM(pair.get(), 1, grad);
            if (PyDict_SetItem(leaves, id.get(), pair.get()) < 0) raise_pending();
        } else {
            if (!PyList_Check(entry) || PyList_GET_SIZE(entry) != 2)
                throw py::type_error("run_backward: a leaves entry must be [tensor, gradient]");
            // owned while _accumulate (Python) runs: nothing it does may free them under us
            Py_INCREF(entry);
            Ref held_entry(entry);
            PyObject* before = PyList_GET_ITEM(entry, 1);
            Py_INCREF(before);
            Ref held_before(before);
            Ref sum = accumulate(h, before, grad);
            if (PyList_SetItem(entry, 1, sum.release()) < 0) raise_pending();
        }
        if (producer.get() == Py_None) return;
    }
    Ref index = attr(tensor, names.out_index);
    Ref key(check(PyTuple_Pack(2, producer.get(), index.get())));
    PyObject* total = PyDict_GetItemWithError(pending, key.get());     // borrowed
    if (total == nullptr) {
        if (PyErr_Occurred()) raise_pending();
        if (PyDict_SetItem(pending, key.get(), grad) < 0) raise_pending();
        return;
    }
    Py_INCREF(total);       // owned while _accumulate (Python) runs, as above
    Ref held_total(total);
    Ref sum = accumulate(h, total, grad);
    if (PyDict_SetItem(pending, key.get(), sum.get()) < 0) raise_pending();
}

// Whether a host array gradient already has the input's shape and dtype (no _fit needed).
bool fits(const Helpers& h, PyObject* tensor, PyObject* grad) {
    if (Py_TYPE(grad) != reinterpret_cast<PyTypeObject*>(h.ndarray)) return false;
    Ref owned_meta;
    PyObject* meta = tensor;
    if (Py_TYPE(tensor) != reinterpret_cast<PyTypeObject*>(h.link_type)) {
        owned_meta = attr(tensor, names.data);
        meta = owned_meta.get();
    }
    Ref gshape = attr(grad, names.shape), mshape = attr(meta, names.shape);
    int same = PyObject_RichCompareBool(gshape.get(), mshape.get(), Py_EQ);
    if (same < 0) raise_pending();
    if (!same) return false;
    Ref gdtype = attr(grad, names.dtype), mdtype = attr(meta, names.dtype);
    if (gdtype.get() != mdtype.get()) return false;
    Ref device = attr(tensor, names.device);
    Ref xp = attr(device.get(), names.xp);
    return xp.get() == h.numpy;
}

// _call_backward's twin for the common case (no input skipped or held back).
void call_backward(const Helpers& h, PyObject* node, PyObject* ctx, PyObject* inputs,
                   PyObject* out_grads, PyObject* pending, PyObject* leaves,
                   PyObject* target_ids) {
    Ref prim = attr(node, names.prim);
    Ref backward = attr(prim.get(), names.backward);
    Py_ssize_t n_out = PyTuple_GET_SIZE(out_grads);
    Ref args(check(PyTuple_New(n_out + 1)));
    Py_INCREF(ctx);
    PyTuple_SET_ITEM(args.get(), 0, ctx);
    for (Py_ssize_t i = 0; i < n_out; ++i) {
        PyObject* g = PyTuple_GET_ITEM(out_grads, i);
        Py_INCREF(g);
        PyTuple_SET_ITEM(args.get(), i + 1, g);
    }
    double start = seconds_now();
    Ref in_grads(check(PyObject_Call(backward.get(), args.get(), nullptr)));
    double spent = seconds_now() - start;
    Ref before = attr(prim.get(), names.backward_time);
    Ref delta(check(PyFloat_FromDouble(spent)));
    Ref after(check(PyNumber_InPlaceAdd(before.get(), delta.get())));
    if (PyObject_SetAttr(prim.get(), names.backward_time, after.get()) < 0) raise_pending();
    if (!PyTuple_Check(in_grads.get())) {
        PyObject* one = in_grads.get();
        in_grads = Ref(check(PyTuple_Pack(1, one)));
    }
    Py_ssize_t n = PyTuple_GET_SIZE(in_grads.get()), n_in = PyTuple_GET_SIZE(inputs);
    if (n != n_in) {
        Ref name = attr(prim.get(), names.name);
        PyErr_Format(PyExc_RuntimeError, "%S.backward returned %zd gradients for %zd inputs",
                     name.get(), n, n_in);
        raise_pending();
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* tensor = PyTuple_GET_ITEM(inputs, i);
        PyObject* grad = PyTuple_GET_ITEM(in_grads.get(), i);
        if (grad == Py_None || tensor == Py_None) continue;
        Ref wants = attr(tensor, names.requires_grad);
        if (!truthy(wants.get())) continue;
        Ref fitted;
        if (!fits(h, tensor, grad)) {
            fitted = Ref(check(PyObject_CallFunctionObjArgs(h.fit, grad, tensor, prim.get(),
                                                            nullptr)));
            grad = fitted.get();
        }
        deliver(h, tensor, grad, pending, leaves, target_ids);
    }
}

// run_backward's loop over the nodes, for a pass with no observer and nothing pruned: each
// node's output gradients taken from ``pending``, its backward run and its input gradients
// delivered; its context dropped unless ``retain_graph``.
void backward_nodes(py::list nodes, py::list node_inputs, py::dict pending, py::dict leaves,
                    py::object target_ids, bool retain_graph, py::tuple helpers) {
    init_names();
    if (helpers.size() != 6) throw py::value_error("backward_nodes: helpers must hold 6 items");
    Helpers h{helpers[0].ptr(), helpers[1].ptr(), helpers[2].ptr(),
              helpers[3].ptr(), helpers[4].ptr(), helpers[5].ptr()};
    if (nodes.size() != node_inputs.size())
        throw py::value_error("backward_nodes: one inputs tuple per node expected");
    Ref zero(check(PyLong_FromLong(0)));
    PyObject* nodes_list = nodes.ptr();
    PyObject* inputs_list = node_inputs.ptr();
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(nodes_list) &&
                               index < PyList_GET_SIZE(inputs_list); ++index) {
        PyObject* node = PyList_GET_ITEM(nodes_list, index);
        Py_INCREF(node);
        Ref node_ref(node);
        Ref inputs(PyList_GET_ITEM(inputs_list, index));
        Py_INCREF(inputs.get());
        Py_INCREF(Py_None);
        if (PyList_SetItem(inputs_list, index, Py_None) < 0) raise_pending();  // held no longer
        if (!PyTuple_Check(inputs.get())) throw py::type_error("node inputs must be a tuple");
        Ref ctx = attr(node, names.ctx);
        if (ctx.get() == Py_None) {
            PyErr_SetString(PyExc_RuntimeError,
                            "trying to backward through the graph a second time; pass "
                            "retain_graph=True to the first backward if you need to");
            raise_pending();
        }
        Ref out_meta = attr(node, names.out_meta);
        Ref out_grads;
        if (out_meta.get() == Py_None) {
            Ref key(check(PyTuple_Pack(2, node, zero.get())));
            PyObject* g = PyDict_GetItemWithError(pending.ptr(), key.get());    // borrowed
            if (g == nullptr) {
                if (PyErr_Occurred()) raise_pending();
                continue;
            }
            Ref grad(g);
            Py_INCREF(g);
            if (PyDict_DelItem(pending.ptr(), key.get()) < 0) raise_pending();
            Ref xp = attr(ctx.get(), names.xp);
            Ref array_type = attr(xp.get(), names.ndarray);
            if (Py_TYPE(g) != reinterpret_cast<PyTypeObject*>(array_type.get())) {
                Ref one(check(PyDict_New()));
                if (PyDict_SetItem(one.get(), key.get(), g) < 0) raise_pending();
                out_grads = Ref(check(PyObject_CallFunctionObjArgs(h.output_gradients, node,
                                                                   one.get(), nullptr)));
            } else {
                out_grads = Ref(check(PyTuple_Pack(1, g)));
            }
        } else {
            out_grads = Ref(check(PyObject_CallFunctionObjArgs(h.output_gradients, node,
                                                               pending.ptr(), nullptr)));
        }
        if (out_grads.get() == Py_None) continue;
        if (!PyTuple_Check(out_grads.get())) throw py::type_error("output gradients must be a tuple");
        call_backward(h, node, ctx.get(), inputs.get(), out_grads.get(), pending.ptr(),
                      leaves.ptr(), target_ids.ptr());
        if (!retain_graph && PyObject_SetAttr(node, names.ctx, Py_None) < 0) raise_pending();
    }
}

}  // namespace

void register_engine(py::module_& m) {
    m.def("topological_order", &topological_order, py::arg("roots"), py::arg("link_type"),
          "autograd._topological_order in C++: (nodes consumers first, their resolved inputs, "
          "ids of the leaves that require a gradient)");
    m.def("backward_nodes", &backward_nodes, py::arg("nodes"), py::arg("node_inputs"),
          py::arg("pending"), py::arg("leaves"), py::arg("target_ids"), py::arg("retain_graph"),
          py::arg("helpers"),
          "run_backward's node loop in C++ for a pass with no observer and nothing pruned; "
          "helpers = (numpy, numpy.ndarray, InputLink, _fit, _accumulate, _output_gradients)");
}

}  // namespace mtd
