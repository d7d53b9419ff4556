// Package framework is the e2e suite's machinery: bringing a target cluster
// up, installing the chart, writing kubeconfigs that impersonate
// ServiceAccounts, and the hostlet that runs controller Deployments as host
// processes on the local target. It asserts nothing; the specs do.
package framework
