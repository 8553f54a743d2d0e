import Foundation
import Logging

/// The line a delivery's result writes, if any: the dispatcher logs each result as it finishes.
extension DeliveryResult {
    /// The log line of a decided outcome (never the token in full, nor the notification's text).
    func log(to logger: Logger) {
        let delivery = self.delivery
        let reason = self.reason ?? ""
        // A line's metadata: the app, the reason, and the device (shortened) or the platform.
        // Logger takes it as an autoclosure, so it is built only for a line that is written: most
        // results write none.
        func about(device: Bool, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
            var metadata = extra
            metadata["push.app"] = "\(delivery.appID)"
            metadata["push.reason"] = "\(reason)"
            if device {
                metadata["push.device"] = "\(Redaction.token(delivery.token))"
            } else {
                metadata["push.platform"] = "\(delivery.platform.rawValue)"
            }
            return metadata
        }
        switch outcome {
        case .deadToken:
            logger.info(
                "device token is dead; marking the device invalid unless it was registered again since",
                metadata: about(device: true)
            )
        case .failed:
            logger.warning("push rejected by the provider", metadata: about(device: true))
        case .unsendable:
            logger.error(
                "the relay could not build the request for this push; the delivery is failed",
                metadata: about(device: false)
            )
        case .credential:
            logger.error(
                "the provider rejected this app's credentials or connection; deliveries wait without using attempts",
                metadata: about(device: false)
            )
        case .expired:
            logger.warning(
                "giving up on a delivery",
                metadata: about(device: true, ["push.attempts": "\(delivery.attempts)"])
            )
        case .retry:
            let delay = nextAttemptAt.map { $0.timeIntervalSinceNow } ?? 0
            logger.debug("push will be retried", metadata: about(device: true, ["push.delay_s": "\(delay)"]))
        case .delivered, .skipped, .lapsed, .handedBack:
            break
        }
    }
}
