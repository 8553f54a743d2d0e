import Hummingbird

/// Turns every error thrown below it, including the router's own 404 and 405, into the API's JSON
/// error response.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return APIError.from(error, logger: context.logger).response()
        }
    }
}
