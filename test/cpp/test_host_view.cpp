// runtime/HostView.h, Note [Host view slots]: a slot's view is re-dressed for each tensor it
// is taken for, is never handed out twice at once, and is left alone while something else
// holds it.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_neuron/torch_neuron.h>

#include "runtime/HostView.h"

namespace {

// Whether `view` is a CPU view of `tensor`'s bytes with its dtype, shape and offset.
void expect_view_of(const at::Tensor& view, const at::Tensor& tensor) {
  EXPECT_TRUE(view.device().is_cpu());
  EXPECT_EQ(view.data_ptr(), tensor.data_ptr());
  EXPECT_EQ(view.dtype(), tensor.dtype());
  EXPECT_EQ(view.sizes(), tensor.sizes());
  EXPECT_EQ(view.strides(), tensor.strides());
  EXPECT_EQ(view.storage_offset(), tensor.storage_offset());
  EXPECT_EQ(view.is_neg(), tensor.is_neg());
  EXPECT_TRUE(torch::equal(view, tensor.cpu()));
}

TEST(HostViewSlot, RedressesOneViewForEachTensorItIsTakenFor) {
  torch_neuron::init();
  const torch::Device neuron("neuron:0");
  const auto a = torch::randn({4, 6}).to(neuron);
  const auto b = torch::arange(30, torch::kInt32).to(neuron).reshape({5, 6}).t().slice(0, 1, 4);
  const auto c = torch::_neg_view(torch::randn({3}).to(neuron));
  torch_neuron::HostViewSlot slot;
  at::Tensor* first = slot.take(a, /*inference_mode=*/false);
  ASSERT_NE(first, nullptr);
  expect_view_of(*first, a);
  const c10::TensorImpl* impl = first->unsafeGetTensorImpl();
  slot.give_back();
  for (const at::Tensor* t : {&b, &c, &a}) {
    at::Tensor* view = slot.take(*t, false);
    ASSERT_NE(view, nullptr);
    expect_view_of(*view, *t);
    EXPECT_EQ(view->unsafeGetTensorImpl(), impl);  // the same view, re-dressed
    slot.give_back();
  }
}

TEST(HostViewSlot, IsNotTakenTwiceAtOnce) {
  const auto a = torch::randn({2}).to(torch::Device("neuron:0"));
  torch_neuron::HostViewSlot slot;
  ASSERT_NE(slot.take(a, false), nullptr);
  EXPECT_EQ(slot.take(a, false), nullptr);  // a nested call gets its own view elsewhere
  slot.give_back();
  EXPECT_NE(slot.take(a, false), nullptr);
}

TEST(HostViewSlot, LeavesAViewThatSomethingElseHolds) {
  const torch::Device neuron("neuron:0");
  const auto a = torch::randn({2, 3}).to(neuron);
  const auto b = torch::randn({7}).to(neuron);
  torch_neuron::HostViewSlot slot;
  const at::Tensor kept = *slot.take(a, false);  // as a kernel returning its argument would
  slot.give_back();
  at::Tensor* view = slot.take(b, false);
  ASSERT_NE(view, nullptr);
  EXPECT_NE(view->unsafeGetTensorImpl(), kept.unsafeGetTensorImpl());
  expect_view_of(*view, b);
  expect_view_of(kept, a);  // untouched
  slot.give_back();
  // A view made outside inference mode has other dispatch keys than one made inside it.
  c10::InferenceMode guard;
  at::Tensor* inference = slot.take(b, /*inference_mode=*/true);
  ASSERT_NE(inference, nullptr);
  EXPECT_TRUE(inference->is_inference());
  expect_view_of(*inference, b);
  slot.give_back();
}

}  // namespace
