// ThreadSanitizer builds only (--config=tsan): teaches TSan Abseil's synchronization.
//
// Debian's libabsl is compiled without TSan, so TSan does not see absl::Mutex, CondVar or
// Notification (atomics and futexes inside an uninstrumented library) and would report
// every access guarded by one as a race. This file defines those entry points in the test
// binary, which takes precedence over the shared library for every caller (pstrain, gRPC
// and Abseil itself); each tells TSan what happens (the annotation interface of
// <sanitizer/tsan_interface.h>, as Abseil's own TSan build does) and calls the library's
// implementation, found with dlsym(RTLD_NEXT).
//
// Known gap: Notification::HasBeenNotified() is inline (an atomic load in the caller) and
// gets no acquire; the blocking waits do.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

#define PSTRAIN_STR2(x) #x
#define PSTRAIN_STR(x) PSTRAIN_STR2(x)
static_assert(sizeof(PSTRAIN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME)) == sizeof("debian3"),
              "the mangled names below are those of Debian's abseil (inline namespace debian3)");

namespace {

template <typename F>
F Real(const char* mangled) {
  void* f = ::dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan absl annotations: %s not found\n", mangled);
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

constexpr unsigned kRead = __tsan_mutex_read_lock;

void Acquired(void* mu, unsigned flags) {
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
}
void Released(void* mu, unsigned flags) {
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}

// Debian's *WithTimeout functions compute a deadline and tail-call the exported
// *WithDeadline function through the PLT, which resolves to the override below: annotating
// both would release (or lock) the mutex twice for one wait, and TSan reports "unlock of an
// unlocked mutex" (gRPC's TimerManager::WaitUntil did). So the *WithTimeout overrides
// annotate nothing themselves and go through the *WithDeadline overrides, with the
// deadline Abseil's DeadlineFromTimeout computes (the real-time clock plus the timeout).
absl::Time DeadlineFromTimeout(absl::Duration timeout) { return absl::Now() + timeout; }

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, kRead);
  real(this);
  __tsan_mutex_post_lock(this, kRead, 0);
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  __tsan_mutex_post_unlock(this, kRead);
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("_ZN4absl7debian35Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("_ZN4absl7debian35Mutex13ReaderTryLockEv");
  __tsan_mutex_pre_lock(this, kRead | __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this, kRead | __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

// The *When* calls return holding the lock (whether or not the condition became true).
void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, kRead);
  real(this, cond);
  __tsan_mutex_post_lock(this, kRead, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  return LockWhenWithDeadline(cond, DeadlineFromTimeout(timeout));
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  return ReaderLockWhenWithDeadline(cond, DeadlineFromTimeout(timeout));
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, kRead);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, kRead, 0);
  return met;
}

// Await releases the (writer) lock while it waits and holds it again when it returns.
void Mutex::Await(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  Released(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  return AwaitWithDeadline(cond, DeadlineFromTimeout(timeout));
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Released(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static const auto real =
      Real<void (*)(CondVar*, Mutex*)>("_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Released(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  real(this, mu);
  __tsan_mutex_post_lock(mu, 0, 0);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  return WaitWithDeadline(mu, DeadlineFromTimeout(timeout));
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Released(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  const bool timed_out = real(this, mu, deadline);
  __tsan_mutex_post_lock(mu, 0, 0);
  return timed_out;
}

// What happened before Notify() happens before the end of every wait that saw it.
void Notification::Notify() {
  static const auto real =
      Real<void (*)(Notification*)>("_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real = Real<void (*)(const Notification*)>(
      "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, absl::Duration)>(
      "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, absl::Time)>(
      "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
