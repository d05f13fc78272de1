// Package deploy holds the tests of the deployment files in deploy/: the
// Helm chart rendered by the pinned helm (a tool of this module) and
// decoded strictly into the Kubernetes API's types, since kubeconform
// cannot fetch its schemas offline.
package deploy
