package io.pushrelay.kit;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/** An {@link UnreadListener} that keeps every event, and the thread each came on. */
final class EventLog implements UnreadListener {
    private final List<Object> events = new ArrayList<>();
    private final List<String> threads = new ArrayList<>();

    @Override
    public synchronized void onUnreadChanged(UnreadCount count) {
        events.add(count);
        threads.add(Thread.currentThread().getName());
    }

    @Override
    public synchronized void onNetworkError(PushRelayException error) {
        events.add(error);
        threads.add(Thread.currentThread().getName());
    }

    /** Every event so far: {@link UnreadCount}s and {@link PushRelayException}s. */
    synchronized List<Object> events() {
        return new ArrayList<>(events);
    }

    /** The counts reported so far. */
    synchronized List<UnreadCount> counts() {
        List<UnreadCount> counts = new ArrayList<>();
        for (Object event : events) if (event instanceof UnreadCount count) counts.add(count);
        return counts;
    }

    /** The errors reported so far. */
    synchronized List<PushRelayException> errors() {
        List<PushRelayException> errors = new ArrayList<>();
        for (Object event : events) if (event instanceof PushRelayException error) errors.add(error);
        return errors;
    }

    /** The last count reported, or null. */
    synchronized UnreadCount last() {
        List<UnreadCount> counts = counts();
        return counts.isEmpty() ? null : counts.get(counts.size() - 1);
    }

    synchronized List<String> threads() {
        return new ArrayList<>(threads);
    }

    /** Waits until the last count reported matches. */
    void awaitLast(String what, Predicate<UnreadCount> condition) {
        Eventually.eventually(what + " (events: " + events() + ")", () -> {
            UnreadCount last = last();
            return last != null && condition.test(last);
        });
    }

    /** Waits until the last count's total is {@code total}. */
    void awaitTotal(int total) {
        awaitLast("a count of " + total, count -> count.getTotal() == total);
    }
}
