package io.pushrelay.kit;

import java.util.ArrayDeque;
import java.util.concurrent.Executor;

/**
 * Runs callbacks on the app's executor one at a time, in the order they were posted, whatever
 * the executor does with several tasks at once (the pattern of {@link Executor}'s documentation).
 */
final class SerialDispatcher {
    private final Executor executor;
    private final ArrayDeque<Runnable> queue = new ArrayDeque<Runnable>();
    private boolean scheduled;

    SerialDispatcher(Executor executor) {
        this.executor = executor;
    }

    /** Queues {@code callback} and makes sure a drain is scheduled. */
    void post(Runnable callback) {
        enqueue(callback);
        flush();
    }

    /**
     * Queues {@code callback} without touching the executor: a caller holding a lock queues under
     * it, so events keep the order of the state changes, and calls {@link #flush()} after
     * releasing it (an executor that runs tasks at once then never runs a listener under the lock).
     */
    void enqueue(Runnable callback) {
        synchronized (queue) {
            queue.add(callback);
        }
    }

    /** Schedules a drain on the executor if callbacks wait and none is scheduled. */
    void flush() {
        synchronized (queue) {
            if (scheduled || queue.isEmpty()) return;
            scheduled = true;
        }
        try {
            executor.execute(new Runnable() {
                @Override
                public void run() {
                    drain();
                }
            });
        } catch (RuntimeException rejected) {
            // The app's executor is shut down: nothing can be delivered any more.
            synchronized (queue) {
                queue.clear();
                scheduled = false;
            }
        }
    }

    private void drain() {
        while (true) {
            Runnable next;
            synchronized (queue) {
                next = queue.poll();
                if (next == null) {
                    scheduled = false;
                    return;
                }
            }
            next.run();
        }
    }
}
