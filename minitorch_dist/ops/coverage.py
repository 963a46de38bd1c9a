"""Coverage of MindSpore's API lists: which names exist here, and which of those refuse.

``MINDSPORE_FUNCTIONS`` is MindSpore's functional list (``mindspore.ops.function``, r2.0);
``MINDSPORE_TENSOR_METHODS`` is the method list of MindSpore's ``Tensor`` page. A name is
*implemented* when it exists and is not a refusal (whose docstring starts "Refused" or which
raises ``NotImplementedError`` naming itself). ``python -m minitorch_dist.ops.coverage``
prints the counts that ``docs/porting_mindspore.md`` reports.
"""
import inspect

MINDSPORE_FUNCTIONS = """
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
adaptive_max_pool3d avg_pool1d avg_pool2d avg_pool3d batch_norm bias_add conv2d conv3d
ctc_greedy_decoder crop_and_resize deformable_conv2d dropout2d dropout3d flatten
interpolate lrn max_pool3d kl_div pad padding pdist prelu relu relu6 binary_cross_entropy
binary_cross_entropy_with_logits cross_entropy nll_loss smooth_l1_loss celu dropout
fast_gelu gumbel_softmax hardshrink hardswish log_softmax mish selu softsign soft_shrink
softmax tanh grid_sample uniform_candidate_sampler cdist bmm cholesky cholesky_inverse abs
accumulate_n acos acosh add addn asin asinh atan atan2 atanh bernoulli bessel_i0
bessel_i0e bessel_i1 bessel_i1e bessel_j0 bessel_j1 bessel_k0 bessel_k0e bessel_k1
bessel_k1e bessel_y0 bessel_y1 bitwise_and bitwise_or bitwise_xor ceil cos cosh div erf
erfc exp expm1 floor floor_div floor_mod inv invert lerp log log1p logical_and logical_not
logical_or logit log_matrix_determinant matrix_determinant mul neg pow round sin sinh sqrt
square sub svd tan trunc truncate_div truncate_mod xdivy xlogy amax amin argmax argmin
cummax cummin logsumexp max mean median min norm prod std approximate_equal equal ge gt
intopk isclose isfinite isnan le less maximum minimum ne same_type_shape batch_dot dot
matmul matrix_solve ger renorm tensor_dot eye fill fills linspace narrow one_hot ones
ones_like zeros_like choice_with_mask gamma laplace multinomial random_poisson
random_categorical random_gamma shuffle standard_laplace standard_normal uniform
adaptive_max_pool2d affine_grid batch_to_space_nd broadcast_to col2im concat count_nonzero
diag dyn_shape expand expand_dims gather gather_d gather_elements gather_nd index_add
index_fill inplace_add inplace_sub inplace_update masked_fill masked_select
matrix_band_part matrix_diag matrix_diag_part matrix_set_diag meshgrid normal nonzero
population_count range rank repeat_elements reshape reverse_sequence scatter_nd select
sequence_mask shape size slice space_to_batch_nd sparse_segment_mean split squeeze stack
strided_slice tensor_scatter_add tensor_scatter_min tensor_scatter_max tensor_scatter_div
tensor_scatter_mul tensor_scatter_sub tensor_scatter_elements tile top_k transpose unique
unique_consecutive unique_with_pad unsorted_segment_max unsorted_segment_min
unsorted_segment_prod unsorted_segment_sum unstack scalar_cast scalar_to_array
scalar_to_tensor tuple_to_array dense_to_sparse_coo dense_to_sparse_csr csr_add
csr_softmax csr_to_coo sparse_add clip_by_global_norm clip_by_value assign assign_add
assign_sub scatter_add scatter_div scatter_min scatter_max scatter_mul scatter_nd_add
scatter_nd_div scatter_nd_max scatter_nd_min scatter_nd_mul scatter_nd_sub scatter_update
derivative grad value_and_grad jacfwd jacrev jet jvp vjp vmap print_ bounding_box_decode
bounding_box_encode check_valid iou blackman_window
""".split()

MINDSPORE_TENSOR_METHODS = """
abs absolute acos add addbmm addcdiv addcmul addmm addmv addr adjoint all amax amin any
angle approximate_equal arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax
argmax_with_value argmin argmin_with_value argsort asin asinh asnumpy as_strided
assign_value astype atan atan2 atanh baddbmm bernoulli bincount bitwise_and
bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor bmm bool broadcast_to ceil
cholesky cholesky_inverse choose chunk clamp clip col2im conj copy copysign cos cosh cross
cummax cummin cumprod cumsum deg2rad det diag diagflat diagonal digamma div divide dsplit
dtype equal erf erfc erfinv exp expand expand_as expand_dims expm1 fill fills flatten flip
fliplr flipud float float_power floor flush_from_cache fold fmod from_numpy gather
gather_elements gather_nd ge ger greater greater_equal gt H half hardshrink has_init
heaviside hsplit hypot i0 igamma igammac index_add index_fill init_data inner
inplace_update int inv inverse invert isclose isfinite is_floating_point isinf isnan
isneginf isposinf isreal is_signed is_complex item itemset itemsize lcm ldexp le lerp less
less_equal lgamma log log10 log1p log2 log_matrix_determinant logaddexp logaddexp2 logdet
logical_and logical_not logical_or logical_xor logit logsumexp long masked_fill
masked_select matrix_determinant max mean median mH min minimum mm msort mT multiply
nan_to_num narrow nbytes ndim ndimension negative nelement new_ones new_zeros numel numpy
nonzero norm not_equal permute positive pow prod ptp rad2deg random_categorical ravel real
reciprocal remainder renorm repeat repeat_interleave reshape reshape_as resize reverse
reverse_sequence round roll rot90 rsqrt scatter_add scatter_div scatter_max scatter_min
scatter_mul scatter_sub searchsorted select set_const_arg sgn shape short sigmoid sign
signbit sin sinc size slogdet soft_shrink split sqrt square squeeze std strides sub
subtract sum sum_to_size svd swapaxes T t take tan tanh tensor_split tile to to_coo to_csr
to_tensor top_k trace transpose tril triu true_divide unbind unfold unique_consecutive
unique_with_pad unsorted_segment_max unsorted_segment_min unsorted_segment_prod unsqueeze
var view view_as where xdivy xlogy vsplit
""".split()


def _refused(obj):
    doc = getattr(obj, "__doc__", None) or ""
    if doc.startswith("Refused"):
        return True
    try:
        source = inspect.getsource(obj) if callable(obj) else ""
    except (OSError, TypeError):
        return False
    return "is not implemented in minitorch_dist" in source and "raise NotImplementedError" in source


def coverage():
    """{"implemented": [...], "refused": [...], "missing": [...]} for the functional list."""
    from .. import ops
    return _split(MINDSPORE_FUNCTIONS, lambda n: getattr(ops, n, None))


def tensor_coverage():
    """The same split for ``Tensor``'s methods and attributes."""
    from ..tensor import Tensor
    return _split(MINDSPORE_TENSOR_METHODS, lambda n: Tensor.__dict__.get(n, getattr(Tensor, n, None)))


def _split(names, lookup):
    report = {"implemented": [], "refused": [], "missing": []}
    for name in names:
        obj = lookup(name)
        key = "missing" if obj is None else "refused" if _refused(obj) else "implemented"
        report[key].append(name)
    return report


def main():
    for title, report in (("mindspore.ops functions", coverage()),
                          ("mindspore.Tensor methods", tensor_coverage())):
        total = sum(len(v) for v in report.values())
        print(f"{title}: {total} listed, {len(report['implemented'])} implemented, "
              f"{len(report['refused'])} refused with an error, {len(report['missing'])} missing")
        for key in ("refused", "missing"):
            if report[key]:
                print(f"  {key}: {', '.join(report[key])}")


if __name__ == "__main__":
    main()
