package io.pushrelay.kit;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/** The library's threads: daemons (they never keep a process alive), named "PushRelayKit-…". */
final class Threads implements ThreadFactory {
    /** The prefix of every thread the library starts. */
    static final String PREFIX = "PushRelayKit-";

    private final String name;
    private final AtomicInteger count = new AtomicInteger();

    Threads(String name) {
        this.name = name;
    }

    @Override
    public Thread newThread(Runnable work) {
        Thread thread = new Thread(work, PREFIX + name + "-" + count.incrementAndGet());
        thread.setDaemon(true);
        return thread;
    }
}
