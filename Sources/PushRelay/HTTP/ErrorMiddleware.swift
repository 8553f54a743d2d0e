import HTTPTypes
import Hummingbird

/// Turns every error thrown below it, including the router's own 404, into the API's JSON error
/// response. A path that a route serves with other methods is answered 405 with `Allow`.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The served routes, filled in as they are registered (after this middleware is added).
    let routes: RouteRecorder<Context>.Recorded

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && context.endpointPath == "NotFound" {
            let allowed = routes.methods(servingPath: request.uri.path)
            guard !allowed.isEmpty else { return APIError.from(error, logger: context.logger).response() }
            let list = allowed.joined(separator: ", ")
            return APIError(
                .methodNotAllowed,
                code: "method_not_allowed",
                message:
                    "this path does not accept \(RequestLogMiddleware<Context>.method(request.method.rawValue)); it accepts \(list)",
                headers: [.allow: list]
            ).response()
        } catch {
            return APIError.from(error, logger: context.logger).response()
        }
    }
}
