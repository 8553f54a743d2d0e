package io.pushrelay.kit;

import java.util.ArrayList;
import java.util.List;

/**
 * A clock that moves only when the test says: the counter's waits end when the test advances it,
 * and the test reads when each waiting thread wants to wake ({@link #deadlines()}).
 */
final class ManualClock implements Clock {
    private long now = 1_000_000;
    private final List<Long> sleepers = new ArrayList<>();

    @Override
    public synchronized long now() {
        return now;
    }

    @Override
    public synchronized void sleepUntil(long deadline) throws InterruptedException {
        Long entry = deadline;
        sleepers.add(entry);
        notifyAll();
        try {
            while (now < deadline) wait();
        } finally {
            sleepers.remove(entry);
            notifyAll();
        }
    }

    synchronized void advance(long millis) {
        now += millis;
        notifyAll();
    }

    /** Moves the clock to {@code deadline} (when it is later). */
    synchronized void advanceTo(long deadline) {
        now = Math.max(now, deadline);
        notifyAll();
    }

    /** The deadlines of the threads waiting now. */
    synchronized List<Long> deadlines() {
        return new ArrayList<>(sleepers);
    }

    /** Waits until exactly one thread waits on the clock; its deadline. */
    long awaitSleeper() {
        long[] found = new long[1];
        Eventually.eventually("a thread waiting on the clock", () -> {
            List<Long> waiting = deadlines();
            if (waiting.size() != 1) return false;
            found[0] = waiting.get(0);
            return true;
        });
        return found[0];
    }
}
