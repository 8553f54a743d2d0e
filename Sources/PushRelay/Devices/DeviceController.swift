import Foundation
import Hummingbird
import Logging

/// The device registry API.
///
/// App servers use an app API key (`devices:read` / `devices:write`); mobile clients use a user JWT
/// and may only touch devices linked to their own user.
struct DeviceController<Repository: DeviceRepository, Context: RequestContext>: Sendable {
    let repository: Repository
    let authenticator: Authenticator
    var settings = DeviceSettings()

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .put("/v1/apps/{app}/devices/{token}", use: register)
            .get("/v1/apps/{app}/devices/{token}", use: get)
            .delete("/v1/apps/{app}/devices/{token}", use: delete)
            .get("/v1/apps/{app}/users/{user}/devices", use: list)
    }

    struct DeviceList: ResponseEncodable {
        var devices: [Device]
    }

    /// `PUT /v1/apps/{app}/devices/{token}`: 201 when created, 200 when updated.
    @Sendable func register(_ request: Request, context: Context) async throws -> EditedResponse<Device> {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        var request = request
        let input = try DeviceRegistrationRequest(
            body: try await request.collectJSON(context: context),
            pathToken: try pathToken(context)
        )
        var userID = input.userID
        var onlyForUser: String?
        if case .user(_, let subject) = principal {
            userID = userID ?? subject
            onlyForUser = subject
        }
        try principal.require(app, scope: .devicesWrite, user: userID)

        let registration = DeviceRegistration(
            appID: app,
            token: input.token,
            platform: input.platform,
            userID: userID,
            environment: input.environment,
            locale: input.locale,
            pushKey: try input.pushKey.map {
                try settings.pushKeys.seal($0.bytes, id: $0.id, app: app, token: input.token)
            }
        )
        // A user token takes over a device registered to no user only where the app allows it.
        let outcome = try await repository.upsert(
            registration,
            onlyForUser: onlyForUser,
            claimUnowned: claimsUnowned(app),
            maxPerUser: settings.maxPerUser
        )
        return try Self.answer(outcome, app: app, token: input.token, logger: context.logger)
    }

    /// A registration's answer: the device (201 or 200), or why it was refused.
    private static func answer(
        _ outcome: DeviceUpsert,
        app: String,
        token: String,
        logger: Logger
    ) throws -> EditedResponse<Device> {
        switch outcome {
        case .created(let device):
            logger.info(
                "device registered",
                metadata: ["push.app": "\(app)", "push.token": "\(Redaction.token(token))"]
            )
            return EditedResponse(status: .created, response: device)
        case .updated(let device):
            return EditedResponse(status: .ok, response: device)
        case .ownedByAnotherUser:
            throw Authenticator.forbidden("this device is registered to another user")
        case .unowned:
            throw Self.unownedDevice(may: "claim", instead: "register")
        case .tooManyDevices(let count):
            throw APIError(
                .conflict,
                code: "too_many_user_devices",
                message:
                    "this user has \(count) active devices in this app, the most allowed (devices.max_per_user); unregister one first"
            )
        }
    }

    /// `GET /v1/apps/{app}/devices/{token}`.
    @Sendable func get(_ request: Request, context: Context) async throws -> Device {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        let token = try lookupToken(context)
        if case .user = principal {} else { try principal.requireAppKey(app, scope: .devicesRead) }
        guard let device = try await repository.get(app: app, token: token) else { throw Self.deviceNotFound }
        // A user sees only their own devices; another user's device is reported as absent.
        if case .user(_, let subject) = principal {
            try principal.require(app, scope: .devicesRead, user: subject)
            guard device.userID == subject else { throw Self.deviceNotFound }
        }
        return device
    }

    /// `DELETE /v1/apps/{app}/devices/{token}`: 204 whether or not the device existed.
    @Sendable func delete(_ request: Request, context: Context) async throws -> HTTPResponse.Status {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        let token = try lookupToken(context)
        var onlyForUser: String?
        if case .user(_, let subject) = principal {
            try principal.require(app, scope: .devicesWrite, user: subject)
            onlyForUser = subject
        } else {
            try principal.requireAppKey(app, scope: .devicesWrite)
        }
        switch try await repository.delete(
            app: app,
            token: token,
            onlyForUser: onlyForUser,
            claimUnowned: claimsUnowned(app)
        ) {
        case .deleted:
            context.logger.info(
                "device unregistered",
                metadata: ["push.app": "\(app)", "push.token": "\(Redaction.token(token))"]
            )
            return .noContent
        case .notFound:
            return .noContent
        case .ownedByAnotherUser:
            throw Authenticator.forbidden("this device is registered to another user")
        case .unowned:
            throw Self.unownedDevice(may: "unregister", instead: "unregister")
        }
    }

    /// `GET /v1/apps/{app}/users/{user}/devices`.
    @Sendable func list(_ request: Request, context: Context) async throws -> DeviceList {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        let user = try InputRules.identifier(
            try context.pathParameter("user"),
            field: "user",
            maxBytes: InputRules.maxTokenBytes
        )
        try principal.require(app, scope: .devicesRead, user: user)
        return DeviceList(devices: try await repository.list(app: app, user: user))
    }

    // MARK: Helpers

    /// Whether a user token of `app` may claim, or unregister, a device registered to no user
    /// (`user_tokens.claim_unowned_devices`).
    private func claimsUnowned(_ app: String) -> Bool {
        authenticator.apps.app(app)?.userTokens?.claimUnownedDevices ?? false
    }

    /// 403 for a user token's `action` on a device registered to no user, saying what an app key does instead.
    static func unownedDevice(may action: String, instead: String) -> APIError {
        Authenticator.forbidden(
            "this device is registered to no user; a user token may not \(action) it (the app's user_tokens.claim_unowned_devices is off): "
                + "\(instead) it with an app key"
        )
    }

    static var deviceNotFound: APIError { APIError(.notFound, code: "device_not_found", message: "no such device") }

    private func pathToken(_ context: Context) throws -> String {
        try context.pathParameter("token")
    }

    /// The token for lookups (``DeviceToken/forLookup(_:)``).
    private func lookupToken(_ context: Context) throws -> String {
        try InputRules.deviceTokenForLookup(try pathToken(context))
    }
}

extension Device: ResponseEncodable {}
