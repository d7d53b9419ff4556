// Package oci builds reproducible OCI images and layers with
// go-containerregistry: one layer of files on an empty base, OCI media
// types, every timestamp at a fixed epoch. The release's images, the OLM
// bundle and catalog images and the e2e's test images are made of it.
//
// Words: an OCI "manifest" here is the registry's image manifest; Portico's
// Kubernetes YAML files are "manifests" only in package internal/manifest,
// and a release's record of what it pushed is publish.Record.
package oci
