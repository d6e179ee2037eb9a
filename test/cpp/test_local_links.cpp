// distributed/LocalLinks.h, Note [Local links]: two ranks' links in one process. Frames keep
// their order whether their receive is posted before or after they arrive, a frame too large
// for its receive fails it and leaves the link usable, and a closed peer fails its receives at
// once.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <thread>

#include "distributed/LocalLinks.h"

namespace {

using torch_neuron::LocalLinks;
using namespace std::chrono_literals;

struct Linked {
  c10::intrusive_ptr<LocalLinks> rank0, rank1;
};

Linked connected(std::chrono::milliseconds timeout = 5s) {
  auto rank0 = c10::make_intrusive<LocalLinks>(0, 2, timeout);
  auto rank1 = c10::make_intrusive<LocalLinks>(1, 2, timeout);
  const std::vector<int64_t> addresses{rank0->address(), rank1->address()};
  const std::vector<int64_t> tokens{rank0->token(), rank1->token()};
  std::thread accepting([&] { rank1->connect(addresses, tokens); });
  rank0->connect(addresses, tokens);
  accepting.join();
  return {rank0, rank1};
}

void send(LocalLinks& from, const at::Tensor& tensor, int to, int tag) {
  std::vector<at::Tensor> tensors{tensor};
  from.send(tensors, to, tag)->wait();
}

c10::intrusive_ptr<c10d::Work> recv(LocalLinks& at, const at::Tensor& into, int from, int tag) {
  std::vector<at::Tensor> tensors{into};
  return at.recv(tensors, from, tag);
}

TEST(LocalLinks, FramesKeepTheirOrderWhetherTheirReceiveIsPostedBeforeOrAfter) {
  auto [rank0, rank1] = connected();
  auto first = torch::zeros({4});
  auto posted_early = recv(*rank1, first, 0, 7);
  send(*rank0, torch::full({4}, 1.0), 1, 7);
  send(*rank0, torch::full({4}, 2.0), 1, 7);
  // Another tag in between belongs to another channel.
  send(*rank0, torch::full({4}, 9.0), 1, 8);
  std::this_thread::sleep_for(20ms);  // the second frame waits as unexpected
  auto second = torch::zeros({4}), third = torch::zeros({4}), other = torch::zeros({4});
  auto late = recv(*rank1, second, 0, 7);
  auto later = recv(*rank1, third, 0, 7);
  send(*rank0, torch::full({4}, 3.0), 1, 7);
  recv(*rank1, other, 0, 8)->wait();
  posted_early->wait();
  late->wait();
  later->wait();
  EXPECT_TRUE(torch::equal(first, torch::full({4}, 1.0)));
  EXPECT_TRUE(torch::equal(second, torch::full({4}, 2.0)));
  EXPECT_TRUE(torch::equal(third, torch::full({4}, 3.0)));
  EXPECT_TRUE(torch::equal(other, torch::full({4}, 9.0)));
}

TEST(LocalLinks, AReceiveFromAnyRankNamesItsSender) {
  auto [rank0, rank1] = connected();
  auto into = torch::zeros({2}, torch::kInt64);
  std::vector<at::Tensor> tensors{into};
  auto work = rank0->recvAnysource(tensors, 3);
  send(*rank1, torch::tensor({5, 6}, torch::kInt64), 0, 3);
  work->wait();
  EXPECT_EQ(work->sourceRank(), 1);
  EXPECT_TRUE(torch::equal(into, torch::tensor({5, 6}, torch::kInt64)));
}

TEST(LocalLinks, AFrameTooLargeForItsReceiveFailsItAndTheLinkStaysUsable) {
  auto [rank0, rank1] = connected();
  auto small = torch::zeros({2});
  auto work = recv(*rank1, small, 0, 1);
  send(*rank0, torch::ones({4}), 1, 1);
  EXPECT_THROW(
      {
        try {
          work->wait();
        } catch (const c10::DistBackendError& e) {
          EXPECT_NE(std::string(e.what()).find("does not fit its receive buffer of 8 bytes"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      c10::DistBackendError);
  auto next = torch::zeros({2});
  auto fits = recv(*rank1, next, 0, 1);
  send(*rank0, torch::full({2}, 4.0), 1, 1);
  fits->wait();
  EXPECT_TRUE(torch::equal(next, torch::full({2}, 4.0)));
}

TEST(LocalLinks, ATruncatingReceiveKeepsWhatFitsInItsParts) {
  auto [rank0, rank1] = connected();
  auto head = torch::zeros({1}), rest = torch::zeros({2});
  auto work = rank1->receive({head, rest}, 0, 2, /*truncate=*/true);
  send(*rank0, torch::arange(5.0), 1, 2);
  work->wait();
  EXPECT_EQ(head.item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(rest, torch::tensor({1.0f, 2.0f})));
}

TEST(LocalLinks, ADeferredLargeFrameStaysAheadOfLaterSmallOnes) {
  auto [rank0, rank1] = connected();
  const auto big = torch::arange(1 << 20, torch::kFloat32);  // 4 MiB: written by the writer
  auto sent = rank0->send_parts({big}, 1, 4, /*may_defer=*/true);
  send(*rank0, torch::full({1}, -1.0), 1, 4);
  auto into_big = torch::zeros({1 << 20}), into_small = torch::zeros({1});
  auto first = recv(*rank1, into_big, 0, 4);
  auto second = recv(*rank1, into_small, 0, 4);
  first->wait();
  second->wait();
  sent->wait();
  EXPECT_TRUE(torch::equal(into_big, big));
  EXPECT_EQ(into_small.item<float>(), -1.0f);
}

TEST(LocalLinks, AReceiveFromAPeerThatClosesFailsAtOnce) {
  auto [rank0, rank1] = connected(/*timeout=*/30s);
  auto into = torch::zeros({1});
  auto work = recv(*rank1, into, 0, 0);
  const auto start = std::chrono::steady_clock::now();
  rank0.reset();  // its sockets close, as when its process exits
  EXPECT_THROW(work->wait(), c10::DistBackendError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // A new receive from it fails when posted.
  EXPECT_THROW(recv(*rank1, into, 0, 0), c10::DistBackendError);
}

}  // namespace
