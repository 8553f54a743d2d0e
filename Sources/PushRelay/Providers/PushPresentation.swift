import Foundation

/// An app's ``PushSettings`` with the defaults filled in, as the providers use them.
struct PushPresentation: Sendable, Hashable {
    var content: PushSettings.Content = .full
    /// The ticket as APNs `thread-id` and FCM data `thread_id`.
    var threadByTicket = true
    var category: String?
    /// `nil` for no sound.
    var sound: String? = "default"
    var titleLocKey: String? = PushSettings.defaultTitleLocKey
    var locKey: String? = PushSettings.defaultLocKey
    var fallbackTitle = PushSettings.defaultFallbackTitle
    var fallbackBody = PushSettings.defaultFallbackBody

    init() {}

    init(_ settings: PushSettings?) {
        guard let settings else { return }
        content = settings.content ?? .full
        threadByTicket = settings.threadID ?? true
        category = settings.category.flatMap { $0.isEmpty ? nil : $0 }
        sound = settings.sound.map { $0.isEmpty ? nil : $0 } ?? "default"
        titleLocKey = settings.titleLocKey.map { $0.isEmpty ? nil : $0 } ?? PushSettings.defaultTitleLocKey
        locKey = settings.locKey.map { $0.isEmpty ? nil : $0 } ?? PushSettings.defaultLocKey
        fallbackTitle = settings.fallbackTitle ?? PushSettings.defaultFallbackTitle
        fallbackBody = settings.fallbackBody ?? PushSettings.defaultFallbackBody
    }
}
