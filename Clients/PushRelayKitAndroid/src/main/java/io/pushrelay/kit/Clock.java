package io.pushrelay.kit;

/**
 * What the counter's waits read: the system's monotonic clock, or in the tests a clock they move
 * by hand, so a schedule (poll intervals, reconnect backoff) is checked without waiting for it.
 */
interface Clock {
    /** Milliseconds on a monotonic scale. */
    long now();

    /** Waits until {@link #now()} reaches {@code deadline}; interrupting the thread ends the wait. */
    void sleepUntil(long deadline) throws InterruptedException;

    /** The system's monotonic clock. */
    Clock SYSTEM = new Clock() {
        @Override
        public long now() {
            return System.nanoTime() / 1000000L;
        }

        @Override
        public void sleepUntil(long deadline) throws InterruptedException {
            long left = deadline - now();
            if (left > 0) Thread.sleep(left);
        }
    };
}
