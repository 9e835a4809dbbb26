package dev.kmirror.devregistry;

import java.util.List;

import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;

/**
 * Workaround 2 of the dev registry build: apicurio-common-app-components-config-index (a Quarkus extension that
 * indexes the registry's dynamic config properties at build time) is excluded, so this produces the list it would
 * have produced, empty. The dev registry needs no property that can be changed at run time.
 */
@ApplicationScoped
public class EmptyDynamicConfig {

    @Produces
    @ApplicationScoped
    DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(List.of());
    }
}
