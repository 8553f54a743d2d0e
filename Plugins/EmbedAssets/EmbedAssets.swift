import Foundation
import PackagePlugin

/// Embeds a target's text assets (`.yaml`, `.mustache`, `.css`, `.js` files among its sources) in
/// the target as string constants of a generated `EmbeddedAssets` enum; for the `PushRelay`
/// target, the package's `Migrations/*.sql` files too (`EmbeddedAssets.migrations`).
///
/// A build-time embed rather than SwiftPM resources: `Bundle.module` on Linux looks for a resource
/// bundle directory beside the executable, and the container image and the Debian package ship
/// the one binary alone. The files stay real files for editors, linters and reviewers; the build
/// regenerates the constants when one of them changes.
@main
struct EmbedAssets: BuildToolPlugin {
    static let extensions: Set<String> = ["yaml", "mustache", "css", "js"]

    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        var assets = target.sourceFiles.map(\.url).filter { Self.extensions.contains($0.pathExtension) }.sorted { $0.path < $1.path }
        if target.name == "PushRelay" {
            let folder = context.package.directoryURL.appending(path: "Migrations")
            let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }.sorted()
            assets += names.map { folder.appending(path: $0) }
        }
        guard !assets.isEmpty else { return [] }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedAssets.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(assets.count) assets in \(target.name)",
                executable: try context.tool(named: "EmbedAssetsTool").url,
                arguments: [target.directoryURL.path, output.path] + assets.map(\.path),
                inputFiles: assets,
                outputFiles: [output]
            )
        ]
    }
}
