package framework

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountUser is the user name Kubernetes gives a ServiceAccount.
func ServiceAccountUser(namespace, name string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name)
}

// ImpersonatingKubeconfig writes, next to dir, a copy of the admin
// kubeconfig whose user impersonates a ServiceAccount (with the groups a
// real token would carry), and returns its path. Every request a process
// sends with it is authorized as that ServiceAccount.
func ImpersonatingKubeconfig(adminKubeconfig, dir, namespace, serviceAccount string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		return "", fmt.Errorf("load %s: %w", adminKubeconfig, err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return "", fmt.Errorf("%s has no current context", adminKubeconfig)
	}
	admin, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return "", fmt.Errorf("%s: no user %q", adminKubeconfig, ctx.AuthInfo)
	}
	user := admin.DeepCopy()
	user.Impersonate = ServiceAccountUser(namespace, serviceAccount)
	user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}

	out := clientcmdapi.NewConfig()
	out.Clusters[ctx.Cluster] = cfg.Clusters[ctx.Cluster]
	out.AuthInfos[serviceAccount] = user
	out.Contexts[serviceAccount] = &clientcmdapi.Context{Cluster: ctx.Cluster, AuthInfo: serviceAccount, Namespace: namespace}
	out.CurrentContext = serviceAccount
	if err := clientcmd.ResolveLocalPaths(out); err != nil {
		return "", err
	}
	path := filepath.Join(dir, serviceAccount+".kubeconfig")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		return "", err
	}
	return path, nil
}
